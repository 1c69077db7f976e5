-- Agent sign-in and approvals: client assertion jti replay protection, CIBA requests and
-- approval_required actions waiting for a person. Times are Unix seconds (poll times in ms).

-- A client assertion's jti, kept until the assertion expires: replay fails across restarts and workers.
CREATE TABLE agent_assertion_jtis (
  agent_id   TEXT NOT NULL,
  jti        TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (agent_id, jti)
) WITHOUT ROWID;
CREATE INDEX agent_assertion_jtis_expiry ON agent_assertion_jtis (expires_at);

-- One request waiting for (or answered by) a person: a CIBA sign-in or an approval_required action.
-- `state` pending → approved | denied; approved → consumed (token redeemed, or action allowed once).
-- A pending row past expires_at reads as expired.
CREATE TABLE agent_approvals (
  id              TEXT PRIMARY KEY,
  kind            TEXT NOT NULL CHECK (kind IN ('ciba', 'action')),
  state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'denied', 'consumed')),
  agent_id        TEXT NOT NULL,
  user_id         TEXT,
  binding_message TEXT,
  -- CIBA: the auth_req_id is looked up by its hash and sealed for display to administrators
  auth_req_hash   TEXT UNIQUE,
  auth_req_enc    TEXT,
  scope           TEXT,
  openid          INTEGER NOT NULL DEFAULT 0,
  poll_interval   INTEGER,
  last_poll_ms    INTEGER,
  -- action: what was asked, and a key over (agent, action, resource, canonical context)
  action          TEXT,
  resource        TEXT,
  context         TEXT,
  action_key      TEXT,
  rule            TEXT,
  created_at      INTEGER NOT NULL,
  expires_at      INTEGER NOT NULL,
  decided_at      INTEGER,
  decided_by      TEXT,
  consumed_at     INTEGER
);
CREATE INDEX agent_approvals_state ON agent_approvals (state, expires_at);
CREATE INDEX agent_approvals_user ON agent_approvals (user_id, state);
CREATE INDEX agent_approvals_action ON agent_approvals (action_key, created_at);
