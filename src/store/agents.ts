import type { Db } from './db.js';
import { attributesOf, type Attributes } from './entities.js';
import { now, parseJson } from './util.js';

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
}

export function agentsStore(db: Db) {
  const insert = db.prepare(
    `INSERT INTO agents (agent_id, name, mode, public_jwk, roles, attributes, created_at, updated_at)
     VALUES (@agent_id, @name, @mode, @public_jwk, @roles, COALESCE(@attributes, '{}'), @t, @t)`,
  );
  const update = db.prepare(
    `UPDATE agents SET name = @name, mode = @mode, public_jwk = @public_jwk, roles = @roles,
       attributes = COALESCE(@attributes, attributes), updated_at = @t WHERE agent_id = @agent_id`,
  );
  const byId = db.prepare<[string], Row>('SELECT * FROM agents WHERE agent_id = ?');
  const list = db.prepare<[], Row>('SELECT * FROM agents ORDER BY created_at, agent_id');
  const revoke = db.prepare('UPDATE agents SET revoked_at = ?, updated_at = ? WHERE agent_id = ? AND revoked_at IS NULL');
  const caps = db.prepare<[string], { name: string; limits: string }>(
    'SELECT name, limits FROM agent_capabilities WHERE agent_id = ? ORDER BY name',
  );
  const putCap = db.prepare(
    'INSERT INTO agent_capabilities (agent_id, name, limits) VALUES (?, ?, ?) ON CONFLICT (agent_id, name) DO UPDATE SET limits = excluded.limits',
  );
  const delCap = db.prepare('DELETE FROM agent_capabilities WHERE agent_id = ? AND name = ?');
  const delCaps = db.prepare('DELETE FROM agent_capabilities WHERE agent_id = ?');
  const del = db.prepare('DELETE FROM agents WHERE agent_id = ?');

  const toAgent = (r: Row): Agent => ({
    agent_id: r.agent_id,
    name: r.name,
    mode: r.mode,
    public_jwk: parseJson(r.public_jwk, {}),
    roles: parseJson(r.roles, []),
    capabilities: caps.all(r.agent_id).map((c) => ({ name: c.name, limits: parseJson(c.limits, {}) })),
    attributes: attributesOf(r.attributes),
    revoked: r.revoked_at != null,
    revoked_at: r.revoked_at,
    created_at: r.created_at,
    updated_at: r.updated_at,
  });
  const params = (id: string, f: AgentFields) => ({
    agent_id: id,
    name: f.name,
    mode: f.mode,
    public_jwk: JSON.stringify(f.public_jwk),
    roles: JSON.stringify(f.roles),
    attributes: f.attributes === undefined ? null : JSON.stringify(f.attributes),
    t: now(),
  });

  return {
    create(id: string, f: AgentFields, capabilities: Capability[]): Agent {
      db.transaction(() => {
        insert.run(params(id, f));
        for (const c of capabilities) putCap.run(id, c.name, JSON.stringify(c.limits ?? {}));
      })();
      return toAgent(byId.get(id)!);
    },
    get(id: string): Agent | undefined {
      const r = byId.get(id);
      return r && toAgent(r);
    },
    list: (): Agent[] => list.all().map(toAgent),
    update(id: string, f: AgentFields, capabilities?: Capability[]): Agent | undefined {
      let changed = 0;
      db.transaction(() => {
        changed = update.run(params(id, f)).changes;
        if (changed && capabilities) {
          delCaps.run(id);
          for (const c of capabilities) putCap.run(id, c.name, JSON.stringify(c.limits ?? {}));
        }
      })();
      return changed ? toAgent(byId.get(id)!) : undefined;
    },
    putCapability: (id: string, name: string, limits: Record<string, unknown>): void =>
      void putCap.run(id, name, JSON.stringify(limits)),
    deleteCapability: (id: string, name: string): boolean => delCap.run(id, name).changes === 1,
    revoke: (id: string): boolean => revoke.run(now(), now(), id).changes === 1,
    delete: (id: string): boolean => del.run(id).changes === 1,
  };
}
export type AgentsStore = ReturnType<typeof agentsStore>;
