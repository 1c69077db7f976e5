-- DPoP (RFC 9449): proofs seen (single use across processes and instances), refresh-token
-- families bound to a key, and the per-client setting that makes a proof mandatory.

-- A proof's jti (hashed with the key's thumbprint), kept until the proof is too old to be accepted anyway.
CREATE TABLE dpop_proof_jtis (
  key_hash   TEXT NOT NULL PRIMARY KEY,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX dpop_proof_jtis_expiry ON dpop_proof_jtis (expires_at);

-- A public client's refresh family bound to the key (RFC 7638 thumbprint) that obtained it.
CREATE TABLE dpop_refresh_bindings (
  family_id  TEXT NOT NULL PRIMARY KEY,
  jkt        TEXT NOT NULL,
  created_at INTEGER NOT NULL
) WITHOUT ROWID;

-- RFC 9449 section 5.2's client metadata: no token without a proof.
ALTER TABLE applications ADD COLUMN dpop_bound_access_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN dpop_bound_access_tokens INTEGER NOT NULL DEFAULT 0;
