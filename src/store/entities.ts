import type { Db } from './db.js';
import { now, parseJson } from './util.js';

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
export function entitiesStore(db: Db) {
  const upsert = db.prepare(
    `INSERT INTO entities (type, id, attributes, created_at, updated_at) VALUES (@type, @id, @attributes, @t, @t)
     ON CONFLICT (type, id) DO UPDATE SET attributes = excluded.attributes, updated_at = excluded.updated_at`,
  );
  const byKey = db.prepare<[string, string], Row>('SELECT * FROM entities WHERE type = ? AND id = ?');
  const page = db.prepare<[string, number, number], Row>('SELECT * FROM entities WHERE type = ? ORDER BY id LIMIT ? OFFSET ?');
  const del = db.prepare('DELETE FROM entities WHERE type = ? AND id = ?');

  return {
    get(type: string, id: string): Entity | undefined {
      const r = byKey.get(type, id);
      return r && toEntity(r);
    },
    /** Stores the entity, replacing the attributes of one that exists (its created_at stays). */
    put(type: string, id: string, attributes: Attributes): Entity {
      upsert.run({ type, id, attributes: JSON.stringify(attributes), t: now() });
      return toEntity(byKey.get(type, id)!);
    },
    delete: (type: string, id: string): boolean => del.run(type, id).changes === 1,
    /** One page of a type's entities, ordered by id. */
    list: (type: string, limit = 100, offset = 0): Entity[] => page.all(type, limit, offset).map(toEntity),
  };
}
export type EntitiesStore = ReturnType<typeof entitiesStore>;
