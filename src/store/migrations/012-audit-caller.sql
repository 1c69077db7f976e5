-- Who asked for a decision when it was not the acting agent itself: the client ID of the
-- application that called (an AuthZEN policy enforcement point). NULL for the agents' own
-- decisions. Part of a record's hash only when set, so earlier records keep their hashes.
ALTER TABLE audit_log ADD COLUMN caller TEXT;
CREATE INDEX audit_log_caller ON audit_log (caller, seq);
