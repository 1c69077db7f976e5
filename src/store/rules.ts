import type { Db } from './db.js';
import { now, parseJson } from './util.js';

export type RuleState = 'draft' | 'live' | 'disabled';
export interface RuleCondition { field: string; op: 'gte' | 'gt' | 'lte' | 'lt' | 'eq' | 'ne'; value: unknown }
export interface RuleFields {
  name: string;
  effect: 'deny' | 'require_approval';
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
  created_at: number;
  updated_at: number;
}
const toRule = (r: Row): Rule => ({
  ...r,
  subjects: parseJson(r.subjects, []),
  condition: parseJson<RuleCondition | null>(r.condition, null),
});

const params = (id: string, f: RuleFields) => ({
  id,
  name: f.name,
  effect: f.effect,
  subjects: JSON.stringify(f.subjects),
  relation: f.relation,
  object: f.object,
  condition: f.condition ? JSON.stringify(f.condition) : null,
  t: now(),
});

export function rulesStore(db: Db) {
  const insert = db.prepare(
    `INSERT INTO rules (id, name, effect, subjects, relation, object, condition, state, created_at, updated_at)
     VALUES (@id, @name, @effect, @subjects, @relation, @object, @condition, 'draft', @t, @t)`,
  );
  const byId = db.prepare<[string], Row>('SELECT * FROM rules WHERE id = ?');
  const byName = db.prepare<[string], Row>('SELECT * FROM rules WHERE name = ?');
  const list = db.prepare<[], Row>('SELECT * FROM rules ORDER BY created_at, id');
  const live = db.prepare<[], Row>("SELECT * FROM rules WHERE state = 'live' ORDER BY name");
  const setState = db.prepare('UPDATE rules SET state = ?, updated_at = ? WHERE id = ?');
  const setValidated = db.prepare('UPDATE rules SET validated_hash = ?, updated_at = ? WHERE id = ?');
  const del = db.prepare('DELETE FROM rules WHERE id = ?');
  const update = db.prepare(
    `UPDATE rules SET name = @name, effect = @effect, subjects = @subjects, relation = @relation, object = @object,
       condition = @condition, updated_at = @t WHERE id = @id`,
  );
  return {
    create(id: string, f: RuleFields): Rule {
      insert.run(params(id, f));
      return toRule(byId.get(id)!);
    },
    get(id: string): Rule | undefined {
      const r = byId.get(id);
      return r && toRule(r);
    },
    getByName(name: string): Rule | undefined {
      const r = byName.get(name);
      return r && toRule(r);
    },
    list: (): Rule[] => list.all().map(toRule),
    live: (): Rule[] => live.all().map(toRule),
    /** Replaces the content; the state is left to the caller (a changed rule needs a new validate). */
    update(id: string, f: RuleFields): Rule | undefined {
      const changes = update.run(params(id, f)).changes;
      if (changes === 0) return undefined;
      return toRule(byId.get(id)!);
    },
    setState: (id: string, state: RuleState): boolean => setState.run(state, now(), id).changes === 1,
    setValidatedHash: (id: string, hash: string | null): boolean => setValidated.run(hash, now(), id).changes === 1,
    delete: (id: string): boolean => del.run(id).changes === 1,
  };
}
export type RulesStore = ReturnType<typeof rulesStore>;
