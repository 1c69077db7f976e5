-- Foundation schema: settings, change counters, signing keys, applications, people,
-- roles, agents, rules, sessions and the audit trail. Times are Unix seconds.

CREATE TABLE settings (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

-- One row per domain whose in-memory caches every worker process must refresh on change.
CREATE TABLE change_counters (
  domain  TEXT PRIMARY KEY,
  version INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE signing_keys (
  kid         TEXT PRIMARY KEY,
  alg         TEXT NOT NULL CHECK (alg IN ('RS256', 'EdDSA')),
  public_jwk  TEXT NOT NULL,
  private_enc TEXT NOT NULL,
  created_at  INTEGER NOT NULL,
  retired_at  INTEGER
);
CREATE INDEX signing_keys_alg ON signing_keys (alg, retired_at);

CREATE TABLE applications (
  client_id                 TEXT PRIMARY KEY,
  name                      TEXT NOT NULL,
  type                      TEXT NOT NULL CHECK (type IN ('web', 'spa', 'native', 'm2m', 'api')),
  redirect_uris             TEXT NOT NULL DEFAULT '[]',
  post_logout_redirect_uris TEXT NOT NULL DEFAULT '[]',
  confidential              INTEGER NOT NULL,
  secret_hash               TEXT,
  refresh_tokens            INTEGER NOT NULL,
  first_party               INTEGER NOT NULL,
  created_at                INTEGER NOT NULL,
  updated_at                INTEGER NOT NULL
);

CREATE TABLE application_grants (
  client_id     TEXT NOT NULL REFERENCES applications (client_id) ON DELETE CASCADE,
  api_client_id TEXT NOT NULL REFERENCES applications (client_id) ON DELETE CASCADE,
  scopes        TEXT NOT NULL DEFAULT '[]',
  PRIMARY KEY (client_id, api_client_id)
);

CREATE TABLE users (
  id                    TEXT PRIMARY KEY,
  email                 TEXT NOT NULL UNIQUE COLLATE NOCASE,
  password_hash         TEXT,
  name                  TEXT NOT NULL,
  email_verified        INTEGER NOT NULL DEFAULT 0,
  picture               TEXT,
  locale                TEXT,
  groups                TEXT NOT NULL DEFAULT '[]',
  roles                 TEXT NOT NULL DEFAULT '[]',
  totp_secret_enc       TEXT,
  password_compromised  INTEGER NOT NULL DEFAULT 0,
  created_at            INTEGER NOT NULL,
  updated_at            INTEGER NOT NULL
);

CREATE TABLE application_assignments (
  client_id TEXT NOT NULL REFERENCES applications (client_id) ON DELETE CASCADE,
  user_id   TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  PRIMARY KEY (client_id, user_id)
);

CREATE TABLE roles (
  name        TEXT PRIMARY KEY,
  permissions TEXT NOT NULL DEFAULT '[]',
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
);

CREATE TABLE agents (
  agent_id   TEXT PRIMARY KEY,
  name       TEXT NOT NULL,
  mode       TEXT NOT NULL CHECK (mode IN ('delegated', 'autonomous')),
  public_jwk TEXT NOT NULL,
  roles      TEXT NOT NULL DEFAULT '[]',
  revoked_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);

CREATE TABLE agent_capabilities (
  agent_id TEXT NOT NULL REFERENCES agents (agent_id) ON DELETE CASCADE,
  name     TEXT NOT NULL,
  limits   TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (agent_id, name)
);

CREATE TABLE rules (
  id             TEXT PRIMARY KEY,
  name           TEXT NOT NULL UNIQUE,
  effect         TEXT NOT NULL CHECK (effect IN ('deny', 'require_approval')),
  subjects       TEXT NOT NULL,
  relation       TEXT NOT NULL,
  object         TEXT NOT NULL,
  condition      TEXT,
  state          TEXT NOT NULL DEFAULT 'draft' CHECK (state IN ('draft', 'live', 'disabled')),
  validated_hash TEXT,
  created_at     INTEGER NOT NULL,
  updated_at     INTEGER NOT NULL
);

-- A person's sign-in session. The cookie carries a random value; only its hash is kept.
CREATE TABLE sessions (
  sid        TEXT PRIMARY KEY,
  user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  token_hash TEXT NOT NULL UNIQUE,
  auth_time  INTEGER NOT NULL,
  amr        TEXT NOT NULL DEFAULT '[]',
  acr        TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  ended_at   INTEGER
);
CREATE INDEX sessions_user ON sessions (user_id);

-- Append-only: each record carries the hash of the one before it.
CREATE TABLE audit_log (
  seq            INTEGER PRIMARY KEY AUTOINCREMENT,
  time           INTEGER NOT NULL,
  kind           TEXT NOT NULL DEFAULT 'decision',
  agent_id       TEXT,
  user_id        TEXT,
  action         TEXT,
  resource       TEXT,
  context        TEXT,
  decision       TEXT,
  reason         TEXT,
  policy_version TEXT,
  prev_hash      TEXT NOT NULL,
  hash           TEXT NOT NULL
);
CREATE INDEX audit_log_agent ON audit_log (agent_id, seq);
-- dialect: sqlite
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
-- dialect: postgres
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'audit_log is append-only'; END $$;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
-- dialect: all
