-- Relationships: who relates to what (`document:1#viewer@user:anne`), as Zanzibar stores them.
-- The subject is an entity (`user:anne`: subject_relation ''), a wildcard (`user:*`: subject_id
-- '*') or a userset (`group:eng#member`: subject_relation 'member'). A condition is a name and
-- a JSON context (the policy declares the name and its parameters). Times are Unix seconds.
CREATE TABLE relationships (
  object_type       TEXT NOT NULL,
  object_id         TEXT NOT NULL,
  relation          TEXT NOT NULL,
  subject_type      TEXT NOT NULL,
  subject_id        TEXT NOT NULL,
  subject_relation  TEXT NOT NULL DEFAULT '',
  condition_name    TEXT,
  condition_context TEXT,
  created_at        INTEGER NOT NULL,
  PRIMARY KEY (object_type, object_id, relation, subject_type, subject_id, subject_relation)
) WITHOUT ROWID;
-- Reverse lookups: what a subject (or a userset) relates to, by type and relation.
CREATE INDEX relationships_by_subject ON relationships (subject_type, subject_id, subject_relation, object_type, relation);

-- Every write and delete in commit order, so that a process holding the relationships in
-- memory applies what changed since it last looked instead of reading them all again. Writers
-- take one lock (`relationships`) for the transaction, so `seq` grows in commit order on
-- PostgreSQL too. Old entries are pruned; a process that fell further behind reloads.
CREATE TABLE relationship_changes (
  seq               INTEGER PRIMARY KEY AUTOINCREMENT,
  op                TEXT NOT NULL CHECK (op IN ('write', 'delete')),
  object_type       TEXT NOT NULL,
  object_id         TEXT NOT NULL,
  relation          TEXT NOT NULL,
  subject_type      TEXT NOT NULL,
  subject_id        TEXT NOT NULL,
  subject_relation  TEXT NOT NULL DEFAULT '',
  condition_name    TEXT,
  condition_context TEXT,
  at                INTEGER NOT NULL
);
CREATE INDEX relationship_changes_at ON relationship_changes (at);
