import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { parseJson, secondsOf } from './util.js';

export type RuleState = 'draft' | 'live' | 'disabled';
/** `{field, op, value}` (a context field against a constant) or `{expr}` (a condition in the policy file syntax). */
export type RuleCondition = { field: string; op: 'gte' | 'gt' | 'lte' | 'lt' | 'eq' | 'ne'; value: unknown } | { expr: string };
export interface RuleFields {
  name: string;
  effect: 'deny' | 'require_approval' | 'permit';
  subjects: string[];
  relation: string;
  object: string;
  condition: RuleCondition | null;
}
export interface Rule extends RuleFields {
  id: string;
  state: RuleState;
  /** hash of the fields last validated successfully; enable needs it to match the current fields */
  validated_hash: string | null;
  /** hash of the fields whose impact on recorded decisions the console last showed; its Enable needs it to match */
  impact_hash: string | null;
  created_at: number;
  updated_at: number;
}
interface Row {
  id: string;
  name: string;
  effect: Rule['effect'];
  subjects: string;
  relation: string;
  object: string;
  condition: string | null;
  state: RuleState;
  validated_hash: string | null;
  impact_hash?: string | null;
  created_at: number;
  updated_at: number;
}
const toRule = (r: Row): Rule => ({
  ...r,
  impact_hash: r.impact_hash ?? null,
  subjects: parseJson(r.subjects, []),
  condition: parseJson<RuleCondition | null>(r.condition, null),
});

const params = (id: string, f: RuleFields, t: number) => ({
  id,
  name: f.name,
  effect: f.effect,
  subjects: JSON.stringify(f.subjects),
  relation: f.relation,
  object: f.object,
  condition: f.condition ? JSON.stringify(f.condition) : null,
  t,
});

const BY_ID = 'SELECT * FROM rules WHERE id = ?';

export function rulesStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const byId = async (id: string): Promise<Rule | undefined> => {
    const r = await sql.get<Row>(BY_ID, [id]);
    return r && toRule(r);
  };
  return {
    async create(id: string, f: RuleFields): Promise<Rule> {
      await sql.run(
        `INSERT INTO rules (id, name, effect, subjects, relation, object, condition, state, created_at, updated_at)
         VALUES (@id, @name, @effect, @subjects, @relation, @object, @condition, 'draft', @t, @t)`,
        params(id, f, now()),
      );
      return (await byId(id))!;
    },
    get: byId,
    async getByName(name: string): Promise<Rule | undefined> {
      const r = await sql.get<Row>('SELECT * FROM rules WHERE name = ?', [name]);
      return r && toRule(r);
    },
    list: async (): Promise<Rule[]> => (await sql.all<Row>('SELECT * FROM rules ORDER BY created_at, id')).map(toRule),
    live: async (): Promise<Rule[]> => (await sql.all<Row>("SELECT * FROM rules WHERE state = 'live' ORDER BY name")).map(toRule),
    /** Replaces the content; the state is left to the caller (a changed rule needs a new validate). */
    async update(id: string, f: RuleFields): Promise<Rule | undefined> {
      const r = await sql.run(
        `UPDATE rules SET name = @name, effect = @effect, subjects = @subjects, relation = @relation, object = @object,
           condition = @condition, updated_at = @t WHERE id = @id`,
        params(id, f, now()),
      );
      if (r.changes === 0) return undefined;
      return byId(id);
    },
    setState: async (id: string, state: RuleState): Promise<boolean> =>
      (await sql.run('UPDATE rules SET state = ?, updated_at = ? WHERE id = ?', [state, now(), id])).changes === 1,
    setValidatedHash: async (id: string, hash: string | null): Promise<boolean> =>
      (await sql.run('UPDATE rules SET validated_hash = ?, updated_at = ? WHERE id = ?', [hash, now(), id])).changes === 1,
    /** Does not touch updated_at: seeing a rule's impact changes nothing about the rule. */
    setImpactHash: async (id: string, hash: string | null): Promise<boolean> =>
      (await sql.run('UPDATE rules SET impact_hash = ? WHERE id = ?', [hash, id])).changes === 1,
    delete: async (id: string): Promise<boolean> => (await sql.run('DELETE FROM rules WHERE id = ?', [id])).changes === 1,
  };
}
export type RulesStore = ReturnType<typeof rulesStore>;
