-- Clients of 2026: pushed authorization requests (RFC 9126), rich authorization requests
-- (RFC 9396) and clients identified by the URL of their metadata document. Times are Unix seconds.

-- A pushed request: the validated parameters an authorization request by `request_uri` uses,
-- looked up by the hash of the request_uri's random part; used once, within its lifetime.
CREATE TABLE pushed_authorization_requests (
  request_hash TEXT PRIMARY KEY,
  client_id    TEXT NOT NULL REFERENCES applications (client_id) ON DELETE CASCADE,
  params       TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL
);
CREATE INDEX pushed_authorization_requests_by_expiry ON pushed_authorization_requests (expires_at);

-- An application that takes authorization requests only through /oauth/par.
ALTER TABLE applications ADD COLUMN require_pushed_authorization_requests INTEGER NOT NULL DEFAULT 0;

-- The declared authorization details types: a JSON Schema each.
CREATE TABLE authorization_details_types (
  type        TEXT PRIMARY KEY,
  description TEXT NOT NULL DEFAULT '',
  schema      TEXT NOT NULL,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
);

-- What a person approved travels with the code, the refresh family and the CIBA request.
ALTER TABLE oauth_codes ADD COLUMN authorization_details TEXT;
ALTER TABLE refresh_families ADD COLUMN authorization_details TEXT;
ALTER TABLE agent_approvals ADD COLUMN authorization_details TEXT;

-- A client known by the URL of its metadata document: its application row (client_id = the
-- URL) is kept from the document, refreshed when the cached copy expires.
CREATE TABLE client_metadata_documents (
  client_id   TEXT PRIMARY KEY REFERENCES applications (client_id) ON DELETE CASCADE,
  document    TEXT NOT NULL,
  auth_method TEXT NOT NULL CHECK (auth_method IN ('none', 'private_key_jwt')),
  jwks_uri    TEXT,
  fetched_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL
);
