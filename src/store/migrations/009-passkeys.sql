-- Passkeys (WebAuthn) and the person's own TOTP enrolment. Times are Unix seconds.

-- A registered passkey. `id` is the credential ID and `public_key` the COSE key, both base64url.
CREATE TABLE webauthn_credentials (
  id           TEXT PRIMARY KEY,
  user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  public_key   TEXT NOT NULL,
  counter      INTEGER NOT NULL DEFAULT 0,
  transports   TEXT NOT NULL DEFAULT '[]',
  -- singleDevice (bound to one authenticator) or multiDevice (synced, backup eligible)
  device_type  TEXT NOT NULL,
  backed_up    INTEGER NOT NULL DEFAULT 0,
  aaguid       TEXT,
  name         TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  last_used_at INTEGER,
  -- set when the signature counter went backwards (a cloned authenticator): no sign-in from then on
  suspended_at INTEGER
);
CREATE INDEX webauthn_credentials_user ON webauthn_credentials (user_id);

-- The WebAuthn user handle of a person: random, so it says nothing about them.
CREATE TABLE webauthn_user_handles (
  user_id TEXT PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  handle  TEXT NOT NULL UNIQUE
);

-- A ceremony's challenge: single use, short lived, bound to the browser that asked for it
-- (the sha256 of its gatehouse_webauthn cookie) and, for a sign-in, to the pending request.
CREATE TABLE webauthn_challenges (
  challenge    TEXT PRIMARY KEY,
  browser_hash TEXT NOT NULL,
  purpose      TEXT NOT NULL,
  -- register: the person; authenticate: the person expected (email first, second step), or NULL
  user_id      TEXT REFERENCES users (id) ON DELETE CASCADE,
  request_id   TEXT,
  created_at   INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL
);
CREATE INDEX webauthn_challenges_browser ON webauthn_challenges (browser_hash);
CREATE INDEX webauthn_challenges_expiry ON webauthn_challenges (expires_at);

-- Which passkey signed a session in, so removing the passkey can end those sessions.
CREATE TABLE webauthn_session_credentials (
  sid           TEXT PRIMARY KEY REFERENCES sessions (sid) ON DELETE CASCADE,
  credential_id TEXT NOT NULL
);
CREATE INDEX webauthn_session_credentials_credential ON webauthn_session_credentials (credential_id);

-- A TOTP secret the person is setting up: it takes effect once they confirm a code from it.
ALTER TABLE users ADD COLUMN totp_pending_enc TEXT;
ALTER TABLE users ADD COLUMN totp_pending_expires_at INTEGER;
