-- Sign-in state for people: pending authorization requests, codes, refresh token families,
-- remembered consents, used TOTP steps and rate-limit counters. Times are Unix seconds.
-- Everything of a person or an application goes with them (ON DELETE CASCADE).

-- An authorization request waiting for the person to sign in, pass a second step or consent.
CREATE TABLE oauth_requests (
  id         TEXT PRIMARY KEY,
  client_id  TEXT NOT NULL REFERENCES applications (client_id) ON DELETE CASCADE,
  params     TEXT NOT NULL,
  -- the person who passed the password step of this request and waits for the second step
  user_id    TEXT REFERENCES users (id) ON DELETE CASCADE,
  -- 1 once the person signed in during this request (prompt=login and max_age are then met)
  fresh      INTEGER NOT NULL DEFAULT 0,
  consented  INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX oauth_requests_expiry ON oauth_requests (expires_at);

-- A family is every refresh token of one sign-in (one code exchange).
CREATE TABLE refresh_families (
  id         TEXT PRIMARY KEY,
  client_id  TEXT NOT NULL REFERENCES applications (client_id) ON DELETE CASCADE,
  user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  sid        TEXT NOT NULL,
  scope      TEXT NOT NULL,
  resource   TEXT,
  auth_time  INTEGER NOT NULL,
  amr        TEXT NOT NULL,
  acr        TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);
CREATE INDEX refresh_families_user ON refresh_families (user_id);
CREATE INDEX refresh_families_client ON refresh_families (client_id);

CREATE TABLE refresh_tokens (
  token_hash TEXT PRIMARY KEY,
  family_id  TEXT NOT NULL REFERENCES refresh_families (id) ON DELETE CASCADE,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  used_at    INTEGER
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);

-- Authorization codes, by sha256; kept after use so a second exchange can revoke its family.
CREATE TABLE oauth_codes (
  code_hash      TEXT PRIMARY KEY,
  client_id      TEXT NOT NULL REFERENCES applications (client_id) ON DELETE CASCADE,
  user_id        TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  sid            TEXT NOT NULL,
  redirect_uri   TEXT NOT NULL,
  scope          TEXT NOT NULL,
  resource       TEXT,
  nonce          TEXT,
  code_challenge TEXT,
  auth_time      INTEGER NOT NULL,
  amr            TEXT NOT NULL,
  acr            TEXT NOT NULL,
  created_at     INTEGER NOT NULL,
  expires_at     INTEGER NOT NULL,
  used_at        INTEGER,
  family_id      TEXT REFERENCES refresh_families (id) ON DELETE SET NULL
);
CREATE INDEX oauth_codes_expiry ON oauth_codes (expires_at);

-- Scopes a person allowed a third-party application, remembered per (person, application).
CREATE TABLE oauth_consents (
  user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  client_id  TEXT NOT NULL REFERENCES applications (client_id) ON DELETE CASCADE,
  scopes     TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (user_id, client_id)
);

-- The last TOTP time step accepted per person: a code is never accepted twice.
CREATE TABLE totp_used (
  user_id TEXT PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  step    INTEGER NOT NULL
);

-- Fixed-window counters of failed attempts (sign-in per account and per address, client authentication).
CREATE TABLE rate_limits (
  key          TEXT PRIMARY KEY,
  count        INTEGER NOT NULL,
  window_start INTEGER NOT NULL
);
