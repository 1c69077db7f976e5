-- Limits over time: what each agent has used of its rates and budgets, in sliding windows.
-- Times are Unix seconds.

-- One counter: one agent, one capability, one thing counted (`count per 1h`,
-- `amount sum per 24h per resource`) and, for a scoped limit, one object or person.
-- `used` is the sum of the counter's events after `horizon`; a decision moves the horizon to
-- the start of its window (subtracting what left it) before it compares.
CREATE TABLE usage_counters (
  id          TEXT PRIMARY KEY,
  agent_id    TEXT NOT NULL REFERENCES agents (agent_id) ON DELETE CASCADE,
  capability  TEXT NOT NULL,
  usage_key   TEXT NOT NULL,
  kind        TEXT NOT NULL CHECK (kind IN ('count', 'sum')),
  field       TEXT,
  per_seconds INTEGER NOT NULL,
  scope       TEXT NOT NULL CHECK (scope IN ('agent', 'resource', 'person')),
  scope_key   TEXT NOT NULL,
  used        REAL NOT NULL,
  horizon     INTEGER NOT NULL,
  next_seq    INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
);
CREATE INDEX usage_counters_agent ON usage_counters (agent_id, capability);
CREATE INDEX usage_counters_idle ON usage_counters (updated_at);

-- One allowed action's share of a counter. `txn` is the transaction token it was allowed
-- under, so that asking again with the same token consumes nothing more.
CREATE TABLE usage_events (
  counter_id TEXT NOT NULL REFERENCES usage_counters (id) ON DELETE CASCADE,
  at         INTEGER NOT NULL,
  seq        INTEGER NOT NULL,
  amount     REAL NOT NULL,
  txn        TEXT,
  PRIMARY KEY (counter_id, at, seq)
);
CREATE UNIQUE INDEX usage_events_txn ON usage_events (txn, counter_id) WHERE txn IS NOT NULL;

-- A decision under limits over time records each counter's value before and after it
-- (JSON: [{id, counter, key?, max, before, after}]).
ALTER TABLE audit_log ADD COLUMN usage TEXT;
