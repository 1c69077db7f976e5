import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { parseJson, secondsOf } from './util.js';

export type Attributes = Record<string, unknown>;

/** A resource the policy can describe: the object `<type>:<id>` of a decision request. */
export interface Entity {
  type: string;
  id: string;
  attributes: Attributes;
  created_at: number;
  updated_at: number;
}
interface Row { type: string; id: string; attributes: string; created_at: number; updated_at: number }

/**
 * The change counter (see settings.bump) every write to entities moves, in the same transaction:
 * a process that caches entity reads drops its cache when the counter moves.
 */
export const ENTITIES_DOMAIN = 'entities';

/** A stored attributes text as an object; anything else (never written by us) reads as none. */
export function attributesOf(text: string | null | undefined): Attributes {
  const v = parseJson<unknown>(text, {});
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Attributes) : {};
}

const toEntity = (r: Row): Entity => ({ ...r, attributes: attributesOf(r.attributes) });

/** Entities by (type, id). Callers bump the `entities` change counter on writes. */
export function entitiesStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const byKey = (type: string, id: string) => sql.get<Row>('SELECT * FROM entities WHERE type = ? AND id = ?', [type, id]);
  return {
    async get(type: string, id: string): Promise<Entity | undefined> {
      const r = await byKey(type, id);
      return r && toEntity(r);
    },
    /** Stores the entity, replacing the attributes of one that exists (its created_at stays). */
    async put(type: string, id: string, attributes: Attributes): Promise<Entity> {
      await sql.run(
        `INSERT INTO entities (type, id, attributes, created_at, updated_at) VALUES (@type, @id, @attributes, @t, @t)
         ON CONFLICT (type, id) DO UPDATE SET attributes = excluded.attributes, updated_at = excluded.updated_at`,
        { type, id, attributes: JSON.stringify(attributes), t: now() },
      );
      return toEntity((await byKey(type, id))!);
    },
    delete: async (type: string, id: string): Promise<boolean> =>
      (await sql.run('DELETE FROM entities WHERE type = ? AND id = ?', [type, id])).changes === 1,
    /** One page of a type's entities, ordered by id. */
    list: async (type: string, limit = 100, offset = 0): Promise<Entity[]> =>
      (await sql.all<Row>('SELECT * FROM entities WHERE type = ? ORDER BY id LIMIT ? OFFSET ?', [type, limit, offset])).map(toEntity),
  };
}
export type EntitiesStore = ReturnType<typeof entitiesStore>;
