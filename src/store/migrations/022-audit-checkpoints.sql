-- Audit retention: records older than the retention are pruned, and each cut leaves a
-- checkpoint signed with the server's signing key: the last pruned record's seq and hash (the
-- chain head at the cut), when the cut was made and how many records were pruned. Verification
-- of what remains starts from the latest checkpoint. `jws` carries the same fields, signed.
CREATE TABLE audit_checkpoints (
  seq          INTEGER PRIMARY KEY,
  hash         TEXT NOT NULL,
  record_time  INTEGER NOT NULL,
  created_at   INTEGER NOT NULL,
  pruned       INTEGER NOT NULL,
  pruned_total INTEGER NOT NULL,
  jws          TEXT NOT NULL
);
-- A record may be deleted only at or below the latest checkpoint (a cut written first, in the same transaction).
-- dialect: sqlite
DROP TRIGGER audit_log_no_delete;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
WHEN OLD.seq > COALESCE((SELECT MAX(seq) FROM audit_checkpoints), 0)
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
-- dialect: postgres
DROP TRIGGER audit_log_no_delete ON audit_log;
CREATE FUNCTION audit_log_prune_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.seq > COALESCE((SELECT MAX(seq) FROM audit_checkpoints), 0) THEN
    RAISE EXCEPTION 'audit_log is append-only';
  END IF;
  RETURN OLD;
END $$;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_log_prune_only();
-- dialect: all
-- The OpenTelemetry trace a record was written in (when tracing is on); hashed only when set.
ALTER TABLE audit_log ADD COLUMN trace_id TEXT;
