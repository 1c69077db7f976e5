-- Identity Assertion JWT Authorization Grants (ID-JAG), both ways.
--
-- As the identity provider: the authorization servers an application may ask an ID-JAG for
-- (`audience` = that server's issuer), and, when the application is registered there under
-- another client ID, that ID (the ID-JAG's `client_id` claim; null: the application's own).
CREATE TABLE application_id_jag_audiences (
  client_id        TEXT NOT NULL REFERENCES applications (client_id) ON DELETE CASCADE,
  audience         TEXT NOT NULL,
  target_client_id TEXT,
  PRIMARY KEY (client_id, audience)
);

-- As the authorization server: the identity providers whose ID-JAGs are accepted, their keys
-- (a JWKS URI fetched when needed, or a JWKS kept here) and how `sub` names a person here
-- (`id`: the person's ID; `email`: the assertion's `email` claim is the person's email).
CREATE TABLE trusted_issuers (
  issuer          TEXT PRIMARY KEY,
  jwks_uri        TEXT,
  jwks            TEXT,
  subject_mapping TEXT NOT NULL,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL
);

-- Each ID-JAG is redeemed once: its (issuer, jti), kept until the assertion expires.
CREATE TABLE id_jag_jtis (
  issuer     TEXT NOT NULL,
  jti        TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (issuer, jti)
);
CREATE INDEX id_jag_jtis_expiry ON id_jag_jtis (expires_at);
