import type { Sql } from './sql.js';
import { attributesOf, type Attributes } from './entities.js';
import type { Clock } from '../clock.js';
import { bool, parseJson, secondsOf } from './util.js';

export type AgentMode = 'delegated' | 'autonomous';
export interface Capability { name: string; limits: Record<string, unknown> }
export interface Agent {
  agent_id: string;
  name: string;
  mode: AgentMode;
  public_jwk: Record<string, unknown>;
  roles: string[];
  capabilities: Capability[];
  /** custom attributes for policy conditions (`subject.<name>`); `{}` when none */
  attributes: Attributes;
  /** the agents it may hand work to (token exchange by a sub-agent); `[]` when none */
  sub_agents: string[];
  /** RFC 9449 section 5.2: every access token is DPoP-bound; a token request without a proof is refused */
  dpop_bound_access_tokens: boolean;
  revoked: boolean;
  revoked_at: number | null;
  created_at: number;
  updated_at: number;
}
interface Row {
  agent_id: string;
  name: string;
  mode: AgentMode;
  public_jwk: string;
  roles: string;
  attributes: string;
  sub_agents: string | null;
  dpop_bound_access_tokens: number;
  revoked_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface AgentFields {
  name: string;
  mode: AgentMode;
  public_jwk: Record<string, unknown>;
  roles: string[];
  /** absent: `{}` on create, unchanged on update */
  attributes?: Attributes;
  /** absent: `[]` on create, unchanged on update */
  sub_agents?: string[];
  /** absent: false on create, unchanged on update */
  dpop_bound_access_tokens?: boolean;
}

const BY_ID = 'SELECT * FROM agents WHERE agent_id = ?';
const PUT_CAP =
  'INSERT INTO agent_capabilities (agent_id, name, limits) VALUES (?, ?, ?) ON CONFLICT (agent_id, name) DO UPDATE SET limits = excluded.limits';

const toAgent = (r: Row, caps: { name: string; limits: string }[]): Agent => ({
  agent_id: r.agent_id,
  name: r.name,
  mode: r.mode,
  public_jwk: parseJson(r.public_jwk, {}),
  roles: parseJson(r.roles, []),
  capabilities: caps.map((c) => ({ name: c.name, limits: parseJson(c.limits, {}) })),
  attributes: attributesOf(r.attributes),
  sub_agents: parseJson(r.sub_agents, []),
  dpop_bound_access_tokens: bool(r.dpop_bound_access_tokens),
  revoked: r.revoked_at != null,
  revoked_at: r.revoked_at,
  created_at: r.created_at,
  updated_at: r.updated_at,
});

const params = (id: string, f: AgentFields, t: number) => ({
  agent_id: id,
  name: f.name,
  mode: f.mode,
  public_jwk: JSON.stringify(f.public_jwk),
  roles: JSON.stringify(f.roles),
  attributes: f.attributes === undefined ? null : JSON.stringify(f.attributes),
  sub_agents: f.sub_agents === undefined ? null : JSON.stringify(f.sub_agents),
  dpop_bound_access_tokens: f.dpop_bound_access_tokens === undefined ? null : f.dpop_bound_access_tokens ? 1 : 0,
  t,
});

export function agentsStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const load = async (s: Sql, id: string): Promise<Agent | undefined> => {
    const r = await s.get<Row>(BY_ID, [id]);
    if (!r) return undefined;
    const caps = await s.all<{ name: string; limits: string }>('SELECT name, limits FROM agent_capabilities WHERE agent_id = ? ORDER BY name', [id]);
    return toAgent(r, caps);
  };

  return {
    create(id: string, f: AgentFields, capabilities: Capability[]): Promise<Agent> {
      return sql.transaction(async (tx) => {
        await tx.run(
          `INSERT INTO agents (agent_id, name, mode, public_jwk, roles, attributes, sub_agents, dpop_bound_access_tokens, created_at, updated_at)
           VALUES (@agent_id, @name, @mode, @public_jwk, @roles, COALESCE(CAST(@attributes AS TEXT), '{}'), COALESCE(CAST(@sub_agents AS TEXT), '[]'),
             COALESCE(CAST(@dpop_bound_access_tokens AS INTEGER), 0), @t, @t)`,
          params(id, f, now()),
        );
        for (const c of capabilities) await tx.run(PUT_CAP, [id, c.name, JSON.stringify(c.limits ?? {})]);
        return (await load(tx, id))!;
      });
    },
    get: (id: string): Promise<Agent | undefined> => load(sql, id),
    async list(): Promise<Agent[]> {
      const rows = await sql.all<Row>('SELECT * FROM agents ORDER BY created_at, agent_id');
      const caps = await sql.all<{ agent_id: string; name: string; limits: string }>(
        'SELECT agent_id, name, limits FROM agent_capabilities ORDER BY agent_id, name',
      );
      const byAgent = new Map<string, { name: string; limits: string }[]>();
      for (const c of caps) byAgent.set(c.agent_id, [...(byAgent.get(c.agent_id) ?? []), c]);
      return rows.map((r) => toAgent(r, byAgent.get(r.agent_id) ?? []));
    },
    update(id: string, f: AgentFields, capabilities?: Capability[]): Promise<Agent | undefined> {
      return sql.transaction(async (tx) => {
        const changed = await tx.run(
          `UPDATE agents SET name = @name, mode = @mode, public_jwk = @public_jwk, roles = @roles,
             attributes = COALESCE(CAST(@attributes AS TEXT), attributes),
             sub_agents = COALESCE(CAST(@sub_agents AS TEXT), sub_agents),
             dpop_bound_access_tokens = COALESCE(CAST(@dpop_bound_access_tokens AS INTEGER), dpop_bound_access_tokens), updated_at = @t WHERE agent_id = @agent_id`,
          params(id, f, now()),
        );
        if (changed.changes === 0) return undefined;
        if (capabilities) {
          await tx.run('DELETE FROM agent_capabilities WHERE agent_id = ?', [id]);
          for (const c of capabilities) await tx.run(PUT_CAP, [id, c.name, JSON.stringify(c.limits ?? {})]);
        }
        return load(tx, id);
      });
    },
    putCapability: async (id: string, name: string, limits: Record<string, unknown>): Promise<void> => {
      await sql.run(PUT_CAP, [id, name, JSON.stringify(limits)]);
    },
    deleteCapability: async (id: string, name: string): Promise<boolean> =>
      (await sql.run('DELETE FROM agent_capabilities WHERE agent_id = ? AND name = ?', [id, name])).changes === 1,
    revoke: async (id: string): Promise<boolean> =>
      (await sql.run('UPDATE agents SET revoked_at = ?, updated_at = ? WHERE agent_id = ? AND revoked_at IS NULL', [now(), now(), id])).changes === 1,
    delete: async (id: string): Promise<boolean> => (await sql.run('DELETE FROM agents WHERE agent_id = ?', [id])).changes === 1,
  };
}
export type AgentsStore = ReturnType<typeof agentsStore>;
