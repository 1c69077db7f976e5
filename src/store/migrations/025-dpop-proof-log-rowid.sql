-- The log of used DPoP proofs without AUTOINCREMENT and without its expiry index: each commit of
-- proofs then writes the log's last page alone, not also sqlite_sequence's and the index's.
-- Numbering stays increasing because housekeeping never deletes the log's last row (a new row
-- takes the last one's number plus one), so a process reading on from the last number it saw
-- misses nothing. The old sequence is carried over as a row of its own when the rows that
-- reached it were already deleted; it is expired, so nothing reads it as a used proof.
-- dialect: sqlite
CREATE TABLE dpop_proof_log_next (
  seq        INTEGER PRIMARY KEY,
  key_hash   TEXT NOT NULL,
  expires_at INTEGER NOT NULL
);
INSERT INTO dpop_proof_log_next (seq, key_hash, expires_at) SELECT seq, key_hash, expires_at FROM dpop_proof_log;
INSERT OR IGNORE INTO dpop_proof_log_next (seq, key_hash, expires_at) SELECT seq, '', 0 FROM sqlite_sequence WHERE name = 'dpop_proof_log';
DROP TABLE dpop_proof_log;
ALTER TABLE dpop_proof_log_next RENAME TO dpop_proof_log;
-- dialect: all
