-- DPoP proofs used, on SQLite: an append-only log instead of a table keyed by the proof. Every
-- process reads the rows appended since it last looked while it holds the write lock, and
-- decides single use against all of them; appended rows share pages, where a random key
-- dirtied a page per proof. PostgreSQL keeps dpop_proof_jtis and its unique key.
-- dialect: sqlite
CREATE TABLE dpop_proof_log (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  key_hash   TEXT NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX dpop_proof_log_expiry ON dpop_proof_log (expires_at);
INSERT INTO dpop_proof_log (key_hash, expires_at) SELECT key_hash, expires_at FROM dpop_proof_jtis ORDER BY expires_at;
DROP TABLE dpop_proof_jtis;
-- dialect: all
