-- Delegation chains. A person's consent that an agent may act for them, with the capabilities
-- it may use (what a token exchange for that agent can carry at most). Times are Unix seconds.
CREATE TABLE delegations (
  user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  agent_id     TEXT NOT NULL REFERENCES agents (agent_id) ON DELETE CASCADE,
  capabilities TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  PRIMARY KEY (user_id, agent_id)
) WITHOUT ROWID;
CREATE INDEX delegations_by_agent ON delegations (agent_id);

-- The sub-agents an agent may hand work to (a JSON list of agent IDs).
ALTER TABLE agents ADD COLUMN sub_agents TEXT NOT NULL DEFAULT '[]';

-- The agents a decision was made through, first (acting for the person) to current, when more than one.
ALTER TABLE audit_log ADD COLUMN chain TEXT;
