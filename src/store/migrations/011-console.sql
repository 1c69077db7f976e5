-- The person behind a change made in the console (their user id). Null for agent decisions,
-- token issues and management API calls made with the bearer token.
ALTER TABLE audit_log ADD COLUMN actor TEXT;

-- Every version of the policy that was in force: its files and live rules as they were, so
-- that any two versions can be compared (`policy diff`) after the files have changed.
CREATE TABLE policy_versions (
  version    TEXT PRIMARY KEY,
  files      TEXT NOT NULL,
  rules      TEXT NOT NULL,
  first_seen INTEGER NOT NULL
);
CREATE INDEX policy_versions_first_seen ON policy_versions (first_seen);
