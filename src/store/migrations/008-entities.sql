-- Attributes and entities: custom facts about agents, people and the things they act on,
-- read by policy conditions (subject.*, person.*, resource.*). Attributes are a JSON object
-- stored as text; times are Unix seconds.

ALTER TABLE agents ADD COLUMN attributes TEXT NOT NULL DEFAULT '{}';
ALTER TABLE users ADD COLUMN attributes TEXT NOT NULL DEFAULT '{}';

-- One resource the policy can describe: the object `<type>:<id>` of a decision request.
CREATE TABLE entities (
  type       TEXT NOT NULL,
  id         TEXT NOT NULL,
  attributes TEXT NOT NULL DEFAULT '{}',
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (type, id)
);
