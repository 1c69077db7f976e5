-- SAML 2.0 connections: `sp` = an application that signs people in through us (we are its IdP);
-- `idp` = an external identity provider (we are its SP: /saml/sp/{name}/metadata).
CREATE TABLE saml_connections (
  name            TEXT PRIMARY KEY,
  kind            TEXT NOT NULL CHECK (kind IN ('sp', 'idp')),
  entity_id       TEXT NOT NULL,
  acs_url         TEXT,
  slo_url         TEXT,
  name_id_format  TEXT,
  idp_sso_url     TEXT,
  idp_certificate TEXT,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL
);
-- An AuthnRequest names its SP by entityID: one SP connection per entityID.
CREATE UNIQUE INDEX saml_connections_sp_entity ON saml_connections (entity_id) WHERE kind = 'sp';

-- An AuthnRequest waiting while the person signs in: single use, shared by every worker.
CREATE TABLE saml_pending_requests (
  id_hash        TEXT PRIMARY KEY,
  connection     TEXT NOT NULL REFERENCES saml_connections (name) ON DELETE CASCADE,
  request_id     TEXT NOT NULL,
  relay_state    TEXT,
  name_id_format TEXT NOT NULL,
  force_authn    INTEGER NOT NULL DEFAULT 0,
  created_at     INTEGER NOT NULL,
  expires_at     INTEGER NOT NULL
);
CREATE INDEX saml_pending_requests_expiry ON saml_pending_requests (expires_at);

-- An AuthnRequest we sent to an external IdP (`idp` connection): its Response must answer it, once.
CREATE TABLE saml_sp_requests (
  request_id  TEXT PRIMARY KEY,
  connection  TEXT NOT NULL REFERENCES saml_connections (name) ON DELETE CASCADE,
  return_to   TEXT,
  expires_at  INTEGER NOT NULL
);
CREATE INDEX saml_sp_requests_expiry ON saml_sp_requests (expires_at);
