-- The person behind a change made in the console (their user id). Null for agent decisions,
-- token issues and management API calls made with the bearer token.
ALTER TABLE audit_log ADD COLUMN actor TEXT;

-- Every version of the policy that was in force: its files and live rules as they were, so
-- that any two versions can be compared (`policy diff`) after the files have changed.
-- `seq` orders them (several can come into force within one second).
CREATE TABLE policy_versions (
  version    TEXT PRIMARY KEY,
  seq        INTEGER NOT NULL,
  files      TEXT NOT NULL,
  rules      TEXT NOT NULL,
  first_seen INTEGER NOT NULL
);
CREATE INDEX policy_versions_seq ON policy_versions (seq);
