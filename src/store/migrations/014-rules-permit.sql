-- Rules of the management API may also permit (grant a relation when their condition holds).
-- A CHECK constraint cannot be changed in place everywhere, so the table is rebuilt.
CREATE TABLE rules_next (
  id             TEXT PRIMARY KEY,
  name           TEXT NOT NULL UNIQUE,
  effect         TEXT NOT NULL CHECK (effect IN ('deny', 'require_approval', 'permit')),
  subjects       TEXT NOT NULL,
  relation       TEXT NOT NULL,
  object         TEXT NOT NULL,
  condition      TEXT,
  state          TEXT NOT NULL DEFAULT 'draft' CHECK (state IN ('draft', 'live', 'disabled')),
  validated_hash TEXT,
  created_at     INTEGER NOT NULL,
  updated_at     INTEGER NOT NULL
);

INSERT INTO rules_next (id, name, effect, subjects, relation, object, condition, state, validated_hash, created_at, updated_at)
  SELECT id, name, effect, subjects, relation, object, condition, state, validated_hash, created_at, updated_at FROM rules;

DROP TABLE rules;

ALTER TABLE rules_next RENAME TO rules;
