import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { parseJson, secondsOf } from './util.js';

/** A person's consent that an agent may act for them, with the capabilities it may use for them. */
export interface Delegation {
  user_id: string;
  agent_id: string;
  capabilities: string[];
  created_at: number;
}
interface Row {
  user_id: string;
  agent_id: string;
  capabilities: string;
  created_at: number;
}

const toDelegation = (r: Row): Delegation => ({
  user_id: r.user_id,
  agent_id: r.agent_id,
  capabilities: parseJson(r.capabilities, []),
  created_at: Number(r.created_at),
});

export function delegationsStore(sql: Sql, clock: Clock) {
  return {
    /** Records (or replaces) a consent; a replaced one keeps when it was first given. */
    put: async (userId: string, agentId: string, capabilities: string[]): Promise<void> => {
      await sql.run(
        `INSERT INTO delegations (user_id, agent_id, capabilities, created_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (user_id, agent_id) DO UPDATE SET capabilities = excluded.capabilities`,
        [userId, agentId, JSON.stringify(capabilities), secondsOf(clock)],
      );
    },
    delete: async (userId: string, agentId: string): Promise<boolean> =>
      (await sql.run('DELETE FROM delegations WHERE user_id = ? AND agent_id = ?', [userId, agentId])).changes === 1,
    get: async (userId: string, agentId: string): Promise<Delegation | undefined> => {
      const r = await sql.get<Row>('SELECT * FROM delegations WHERE user_id = ? AND agent_id = ?', [userId, agentId]);
      return r ? toDelegation(r) : undefined;
    },
    /** A person's consents, oldest first. */
    listForUser: async (userId: string): Promise<Delegation[]> =>
      (await sql.all<Row>('SELECT * FROM delegations WHERE user_id = ? ORDER BY created_at, agent_id', [userId])).map(toDelegation),
    /** The people who let an agent act for them. */
    listForAgent: async (agentId: string): Promise<Delegation[]> =>
      (await sql.all<Row>('SELECT * FROM delegations WHERE agent_id = ? ORDER BY user_id', [agentId])).map(toDelegation),
  };
}
export type DelegationsStore = ReturnType<typeof delegationsStore>;
