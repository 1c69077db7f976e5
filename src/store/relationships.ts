import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { bumpCounter, type ChangeFeed } from './changes.js';
import { parseJson, secondsOf } from './util.js';

/**
 * Relationships as the store keeps them: `object` `<type>:<id>`, `relation`, and `subject` one of
 * `<type>:<id>` (an entity), `<type>:*` (every entity of the type) or `<type>:<id>#<relation>`
 * (a userset), with an optional condition (a name the policy declares and a stored context).
 * The shape is checked before it gets here (the management API, the project file); this module
 * only splits and joins the parts.
 */
export interface Relationship {
  object: string;
  relation: string;
  subject: string;
  condition?: { name: string; context?: Record<string, unknown> };
}

/** A change as the change log keeps it, in commit order. */
export interface RelationshipChange {
  seq: number;
  op: 'write' | 'delete';
  relationship: Relationship;
}

/** The change counter every relationship write moves, in the writing transaction. */
export const RELATIONSHIPS_DOMAIN = 'relationships';

interface Row extends Key {
  condition_name: string | null;
  condition_context: string | null;
}
interface ChangeRow extends Row {
  seq: number | string;
  op: 'write' | 'delete';
}

interface Key {
  object_type: string;
  object_id: string;
  relation: string;
  subject_type: string;
  subject_id: string;
  subject_relation: string;
}

/** `type:id` → [type, id] (the type holds no `:`; the id may). */
export function splitObject(object: string): [string, string] {
  const colon = object.indexOf(':');
  return colon < 0 ? [object, ''] : [object.slice(0, colon), object.slice(colon + 1)];
}

/** `type:id#rel` → [type, id, rel]; `type:id` and `type:*` → [type, id, '']. */
export function splitSubject(subject: string): [string, string, string] {
  const hash = subject.indexOf('#');
  const [type, id] = splitObject(hash < 0 ? subject : subject.slice(0, hash));
  return [type, id, hash < 0 ? '' : subject.slice(hash + 1)];
}

function keyOf(r: Relationship): Key {
  const [object_type, object_id] = splitObject(r.object);
  const [subject_type, subject_id, subject_relation] = splitSubject(r.subject);
  return { object_type, object_id, relation: r.relation, subject_type, subject_id, subject_relation };
}

function toRelationship(r: Row): Relationship {
  const rel: Relationship = {
    object: `${r.object_type}:${r.object_id}`,
    relation: r.relation,
    subject: `${r.subject_type}:${r.subject_id}${r.subject_relation ? `#${r.subject_relation}` : ''}`,
  };
  if (r.condition_name) rel.condition = { name: r.condition_name, context: parseJson<Record<string, unknown>>(r.condition_context, {}) };
  return rel;
}

const conditionText = (r: Relationship): string | null => (r.condition ? JSON.stringify(r.condition.context ?? {}) : null);

const KEY_COLUMNS = ['object_type', 'object_id', 'relation', 'subject_type', 'subject_id', 'subject_relation'] as const;
const KEY_MATCH = KEY_COLUMNS.map((c) => `${c} = @${c}`).join(' AND ');

/** A page token: the key of the last relationship of the page, as base64url JSON. */
function encodeToken(k: Key): string {
  return Buffer.from(JSON.stringify(KEY_COLUMNS.map((c) => k[c]))).toString('base64url');
}
/** The key a page token names, or undefined when it is not one of ours. */
export function decodePageToken(token: string): Key | undefined {
  const parts = parseJson<unknown>(Buffer.from(token, 'base64url').toString('utf8'), null);
  // A NUL is in no stored key (and PostgreSQL's text refuses it).
  if (!Array.isArray(parts) || parts.length !== KEY_COLUMNS.length || !parts.every((p) => typeof p === 'string' && !p.includes('\u0000'))) return undefined;
  return Object.fromEntries(KEY_COLUMNS.map((c, i) => [c, parts[i]])) as unknown as Key;
}

/** Filters of a relationship listing: an object (`document:1`) or a type (`document:`), a relation, a subject. */
export interface RelationshipFilter {
  object?: string;
  relation?: string;
  subject?: string;
}

/** Rows after `after` in primary-key order (a row-value comparison both databases accept). */
const AFTER = `(object_type, object_id, relation, subject_type, subject_id, subject_relation) >
  (@a_object_type, @a_object_id, @a_relation, @a_subject_type, @a_subject_id, @a_subject_relation)`;
const afterParams = (k: Key) => Object.fromEntries(KEY_COLUMNS.map((c) => [`a_${c}`, k[c]]));

export function relationshipsStore(sql: Sql, changes: ChangeFeed, clock: Clock) {
  const log = (op: 'write' | 'delete', k: Key, r: Relationship) =>
    sql.run(
      `INSERT INTO relationship_changes (op, object_type, object_id, relation, subject_type, subject_id, subject_relation, condition_name, condition_context, at)
       VALUES (@op, @object_type, @object_id, @relation, @subject_type, @subject_id, @subject_relation, @condition_name, @condition_context, @at)`,
      { op, ...k, condition_name: op === 'write' ? (r.condition?.name ?? null) : null, condition_context: op === 'write' ? conditionText(r) : null, at: secondsOf(clock) },
    );

  return {
    /**
     * Deletes, then writes, in one transaction (all or nothing). Writing a relationship that
     * exists replaces its condition; deleting one that does not exist is no error. Each change
     * is logged in commit order and moves the `relationships` counter.
     */
    async apply(writes: readonly Relationship[], deletes: readonly Relationship[]): Promise<{ written: number; deleted: number }> {
      return sql.transaction(async (tx) => {
        await tx.lock(RELATIONSHIPS_DOMAIN);
        const inTx = relationshipsStore(tx, changes, clock);
        let moved = false;
        for (const r of deletes) {
          const k = keyOf(r);
          if ((await tx.run(`DELETE FROM relationships WHERE ${KEY_MATCH}`, k)).changes > 0) {
            await inTx.logChange('delete', k, r);
            moved = true;
          }
        }
        for (const r of writes) {
          const k = keyOf(r);
          const existing = await tx.get<Row>(`SELECT * FROM relationships WHERE ${KEY_MATCH}`, k);
          const name = r.condition?.name ?? null;
          const context = conditionText(r);
          if (existing && existing.condition_name === name && (name === null || JSON.stringify(parseJson(existing.condition_context, {})) === context)) continue;
          await tx.run(
            `INSERT INTO relationships (object_type, object_id, relation, subject_type, subject_id, subject_relation, condition_name, condition_context, created_at)
             VALUES (@object_type, @object_id, @relation, @subject_type, @subject_id, @subject_relation, @condition_name, @condition_context, @t)
             ON CONFLICT (object_type, object_id, relation, subject_type, subject_id, subject_relation)
             DO UPDATE SET condition_name = excluded.condition_name, condition_context = excluded.condition_context`,
            { ...k, condition_name: name, condition_context: context, t: secondsOf(clock) },
          );
          await inTx.logChange('write', k, r);
          moved = true;
        }
        if (moved) await bumpCounter(tx, changes, RELATIONSHIPS_DOMAIN);
        return { written: writes.length, deleted: deletes.length };
      });
    },

    /** @internal one change-log entry (inside `apply`'s transaction) */
    logChange: log,

    /**
     * One page of relationships in key order, filtered by object (`type:id`, or `type:` for
     * every object of a type), relation and subject; `after` is the previous page's last key.
     */
    async page(filter: RelationshipFilter, limit: number, after?: Key): Promise<{ data: Relationship[]; next?: string }> {
      const where: string[] = [];
      const params: Record<string, unknown> = {};
      if (filter.object !== undefined) {
        const [type, id] = splitObject(filter.object);
        where.push('object_type = @f_object_type');
        params.f_object_type = type;
        if (id !== '') {
          where.push('object_id = @f_object_id');
          params.f_object_id = id;
        }
      }
      if (filter.relation !== undefined) {
        where.push('relation = @f_relation');
        params.f_relation = filter.relation;
      }
      if (filter.subject !== undefined) {
        const [type, id, rel] = splitSubject(filter.subject);
        where.push('subject_type = @f_subject_type');
        params.f_subject_type = type;
        if (id !== '') {
          where.push('subject_id = @f_subject_id AND subject_relation = @f_subject_relation');
          params.f_subject_id = id;
          params.f_subject_relation = rel;
        }
      }
      if (after) {
        where.push(AFTER);
        Object.assign(params, afterParams(after));
      }
      params.limit = limit + 1;
      const rows = await sql.all<Row>(
        `SELECT * FROM relationships ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
         ORDER BY object_type, object_id, relation, subject_type, subject_id, subject_relation LIMIT @limit`,
        params,
      );
      const more = rows.length > limit;
      const page = more ? rows.slice(0, limit) : rows;
      return { data: page.map(toRelationship), next: more ? encodeToken(page[page.length - 1]!) : undefined };
    },

    /** Every relationship, in chunks of `chunk`, in key order (for loading an in-memory index). */
    async *each(chunk = 10_000): AsyncGenerator<Relationship[]> {
      let after: Key | undefined;
      for (;;) {
        const rows = await sql.all<Row>(
          `SELECT * FROM relationships ${after ? `WHERE ${AFTER}` : ''}
           ORDER BY object_type, object_id, relation, subject_type, subject_id, subject_relation LIMIT @limit`,
          { ...(after ? afterParams(after) : {}), limit: chunk },
        );
        if (rows.length === 0) return;
        yield rows.map(toRelationship);
        if (rows.length < chunk) return;
        after = rows[rows.length - 1]!;
      }
    },

    /** The newest change's sequence number (0 when none was ever logged). */
    latestChange: async (): Promise<number> =>
      Number((await sql.get<{ seq: number | null }>('SELECT MAX(seq) AS seq FROM relationship_changes'))?.seq ?? 0),

    /** The oldest change still logged (undefined when the log is empty). */
    oldestChange: async (): Promise<number | undefined> => {
      const seq = (await sql.get<{ seq: number | null }>('SELECT MIN(seq) AS seq FROM relationship_changes'))?.seq;
      return seq == null ? undefined : Number(seq);
    },

    /** Changes after `seq`, in commit order, at most `limit`. */
    async changesSince(seq: number, limit = 10_000): Promise<RelationshipChange[]> {
      const rows = await sql.all<ChangeRow>('SELECT * FROM relationship_changes WHERE seq > ? ORDER BY seq LIMIT ?', [seq, limit]);
      return rows.map((r) => ({ seq: Number(r.seq), op: r.op, relationship: toRelationship(r) }));
    },

    /** Drops change-log entries older than `t` (Unix seconds), keeping the newest one. */
    purgeChangesBefore: async (t: number): Promise<number> =>
      (await sql.run('DELETE FROM relationship_changes WHERE at < ? AND seq < (SELECT MAX(seq) FROM relationship_changes)', [t])).changes,

    count: async (): Promise<number> => Number((await sql.get<{ n: number }>('SELECT COUNT(*) AS n FROM relationships'))?.n ?? 0),
  };
}
export type RelationshipsStore = ReturnType<typeof relationshipsStore>;
