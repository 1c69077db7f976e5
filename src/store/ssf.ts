import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { bool, parseJson, secondsOf } from './util.js';

export type StreamStatus = 'enabled' | 'paused' | 'disabled';
export type SubjectFormat = 'iss_sub' | 'email';
export type OutboxState = 'pending' | 'delivered' | 'failed' | 'dropped';

export interface StreamRecord {
  stream_id: string;
  aud: string | string[];
  delivery_method: string;
  endpoint_url: string;
  /** sealed; opened only by the delivery worker and the stream view */
  authorization_header_enc: string | null;
  events_requested: string[];
  description: string | null;
  subject_format: SubjectFormat;
  status: StreamStatus;
  status_reason: string | null;
  created_at: number;
  updated_at: number;
}

interface StreamRow extends Omit<StreamRecord, 'aud' | 'events_requested'> {
  aud: string;
  events_requested: string;
}

const toStream = (r: StreamRow): StreamRecord => ({
  ...r,
  aud: parseJson<string | string[]>(r.aud, ''),
  events_requested: parseJson<string[]>(r.events_requested, []),
});

/** The receiver-supplied (and receiver-chosen) part of a stream. */
export interface StreamFields {
  aud: string | string[];
  delivery_method: string;
  endpoint_url: string;
  authorization_header_enc: string | null;
  events_requested: string[];
  description: string | null;
  subject_format: SubjectFormat;
}

export interface StreamSubject {
  subject: Record<string, unknown>;
  verified: boolean;
}

export interface OutboxEvent {
  id: number;
  stream_id: string;
  jti: string;
  event_type: string;
  claims: Record<string, unknown>;
  state: OutboxState;
  attempts: number;
  next_attempt_at: number;
  last_error: string | null;
  created_at: number;
  delivered_at: number | null;
}
interface OutboxRow extends Omit<OutboxEvent, 'claims'> { claims: string }
const toOutbox = (r: OutboxRow): OutboxEvent => ({ ...r, claims: parseJson(r.claims, {}) });

const STREAM_BY_ID = 'SELECT * FROM ssf_streams WHERE stream_id = ?';

const streamParams = (id: string, f: StreamFields, t: number) => ({
  stream_id: id,
  aud: JSON.stringify(f.aud),
  delivery_method: f.delivery_method,
  endpoint_url: f.endpoint_url,
  authorization_header_enc: f.authorization_header_enc,
  events_requested: JSON.stringify(f.events_requested),
  description: f.description,
  subject_format: f.subject_format,
  t,
});

export function ssfStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const getStream = async (id: string): Promise<StreamRecord | undefined> => {
    const r = await sql.get<StreamRow>(STREAM_BY_ID, [id]);
    return r && toStream(r);
  };
  return {
    async createStream(id: string, f: StreamFields): Promise<StreamRecord> {
      await sql.run(
        `INSERT INTO ssf_streams (stream_id, aud, delivery_method, endpoint_url, authorization_header_enc, events_requested,
           description, subject_format, status, created_at, updated_at)
         VALUES (@stream_id, @aud, @delivery_method, @endpoint_url, @authorization_header_enc, @events_requested,
           @description, @subject_format, 'enabled', @t, @t)`,
        streamParams(id, f, now()),
      );
      return (await getStream(id))!;
    },
    async updateStream(id: string, f: StreamFields): Promise<StreamRecord | undefined> {
      await sql.run(
        `UPDATE ssf_streams SET aud = @aud, delivery_method = @delivery_method, endpoint_url = @endpoint_url,
           authorization_header_enc = @authorization_header_enc, events_requested = @events_requested,
           description = @description, subject_format = @subject_format, updated_at = @t
         WHERE stream_id = @stream_id`,
        streamParams(id, f, now()),
      );
      return getStream(id);
    },
    getStream,
    async streamByEndpoint(url: string): Promise<StreamRecord | undefined> {
      const r = await sql.get<StreamRow>('SELECT * FROM ssf_streams WHERE endpoint_url = ?', [url]);
      return r && toStream(r);
    },
    listStreams: async (): Promise<StreamRecord[]> =>
      (await sql.all<StreamRow>('SELECT * FROM ssf_streams ORDER BY created_at, stream_id')).map(toStream),
    /** Streams that take new events: enabled or paused (a disabled stream holds nothing). */
    liveStreams: async (): Promise<StreamRecord[]> =>
      (await sql.all<StreamRow>("SELECT * FROM ssf_streams WHERE status IN ('enabled', 'paused') ORDER BY created_at, stream_id")).map(toStream),
    deleteStream: async (id: string): Promise<boolean> => (await sql.run('DELETE FROM ssf_streams WHERE stream_id = ?', [id])).changes === 1,
    /** Sets the status; moving to `disabled` drops the events still waiting for the stream. */
    setStatus(id: string, status: StreamStatus, reason: string | null): Promise<boolean> {
      return sql.transaction(async (tx) => {
        const changed = (await tx.run('UPDATE ssf_streams SET status = ?, status_reason = ?, updated_at = ? WHERE stream_id = ?', [status, reason, now(), id])).changes === 1;
        if (changed && status === 'disabled') {
          await tx.run("UPDATE ssf_outbox SET state = 'dropped', last_error = ? WHERE stream_id = ? AND state = 'pending'", ['stream disabled', id]);
        }
        return changed;
      });
    },

    addSubject: async (streamId: string, key: string, subject: unknown, verified: boolean): Promise<void> => {
      await sql.run(
        `INSERT INTO ssf_stream_subjects (stream_id, subject_key, subject, verified, created_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (stream_id, subject_key) DO UPDATE SET verified = excluded.verified`,
        [streamId, key, JSON.stringify(subject), verified ? 1 : 0, now()],
      );
    },
    removeSubject: async (streamId: string, key: string): Promise<boolean> =>
      (await sql.run('DELETE FROM ssf_stream_subjects WHERE stream_id = ? AND subject_key = ?', [streamId, key])).changes === 1,
    subjects: async (streamId: string): Promise<StreamSubject[]> =>
      (
        await sql.all<{ subject: string; verified: number }>(
          'SELECT subject, verified FROM ssf_stream_subjects WHERE stream_id = ? ORDER BY created_at, subject_key',
          [streamId],
        )
      ).map((r) => ({ subject: parseJson(r.subject, {}), verified: bool(r.verified) })),

    async enqueue(e: { stream_id: string; jti: string; event_type: string; claims: Record<string, unknown> }): Promise<void> {
      const t = clock.now();
      await sql.run(
        `INSERT INTO ssf_outbox (stream_id, jti, event_type, claims, state, attempts, next_attempt_at, created_at)
         VALUES (@stream_id, @jti, @event_type, @claims, 'pending', 0, @next_attempt_at, @created_at)`,
        { stream_id: e.stream_id, jti: e.jti, event_type: e.event_type, claims: JSON.stringify(e.claims), next_attempt_at: t, created_at: Math.floor(t / 1000) },
      );
    },
    /**
     * Enabled streams with rows due (a paused stream's rows wait: SSF holds them until it is
     * enabled), the longest-waiting first.
     */
    dueStreams: async (nowMs: number, limit: number): Promise<string[]> =>
      (
        await sql.all<{ stream_id: string }>(
          `SELECT o.stream_id FROM ssf_outbox o JOIN ssf_streams s ON s.stream_id = o.stream_id
           WHERE o.state = 'pending' AND o.next_attempt_at <= ? AND s.status = 'enabled'
           GROUP BY o.stream_id ORDER BY MIN(o.id) LIMIT ?`,
          [nowMs, limit],
        )
      ).map((r) => r.stream_id),
    /** One stream's due rows, in order, while the stream is enabled. */
    dueOf: async (streamId: string, nowMs: number, limit: number): Promise<OutboxEvent[]> =>
      (
        await sql.all<OutboxRow>(
          `SELECT o.* FROM ssf_outbox o JOIN ssf_streams s ON s.stream_id = o.stream_id
           WHERE o.stream_id = ? AND o.state = 'pending' AND o.next_attempt_at <= ? AND s.status = 'enabled'
           ORDER BY o.id LIMIT ?`,
          [streamId, nowMs, limit],
        )
      ).map(toOutbox),
    /** When the next pending row of an enabled stream comes due (ms), if any. */
    nextDueAt: async (): Promise<number | null> => {
      const r = await sql.get<{ at: number | null }>(
        `SELECT MIN(o.next_attempt_at) AS at FROM ssf_outbox o JOIN ssf_streams s ON s.stream_id = o.stream_id
         WHERE o.state = 'pending' AND s.status = 'enabled'`,
      );
      return r?.at == null ? null : Number(r.at);
    },
    /** Events waiting for delivery, over every stream (the metrics' backlog). */
    backlog: async (): Promise<number> =>
      Number((await sql.get<{ n: number }>("SELECT COUNT(*) AS n FROM ssf_outbox WHERE state = 'pending'"))?.n ?? 0),
    markDelivered: async (id: number): Promise<boolean> =>
      (
        await sql.run("UPDATE ssf_outbox SET state = 'delivered', attempts = attempts + 1, delivered_at = ?, last_error = NULL WHERE id = ? AND state = 'pending'", [
          now(), id,
        ])
      ).changes === 1,
    /**
     * Counts a failed attempt and schedules the next. The stream's other pending rows wait as
     * long (a receiver that is down is not tried once per row), which also keeps them in order.
     */
    markRetry(id: number, streamId: string, nextAttemptAt: number, error: string): Promise<boolean> {
      return sql.transaction(async (tx) => {
        const changed =
          (await tx.run("UPDATE ssf_outbox SET attempts = attempts + 1, next_attempt_at = ?, last_error = ? WHERE id = ? AND state = 'pending'", [
            nextAttemptAt, error, id,
          ])).changes === 1;
        if (changed) {
          await tx.run(
            "UPDATE ssf_outbox SET next_attempt_at = CASE WHEN next_attempt_at < ? THEN ? ELSE next_attempt_at END WHERE stream_id = ? AND state = 'pending'",
            [nextAttemptAt, nextAttemptAt, streamId],
          );
        }
        return changed;
      });
    },
    markFailed: async (id: number, error: string): Promise<boolean> =>
      (await sql.run("UPDATE ssf_outbox SET state = 'failed', attempts = attempts + 1, last_error = ? WHERE id = ? AND state = 'pending'", [error, id])).changes === 1,
    /** Puts a stream's failed events back in the queue, with their attempts reset. */
    retryFailed: async (streamId: string): Promise<number> =>
      (await sql.run("UPDATE ssf_outbox SET state = 'pending', attempts = 0, next_attempt_at = ? WHERE stream_id = ? AND state = 'failed'", [clock.now(), streamId]))
        .changes,
    events: async (streamId: string, state: OutboxState | null, limit: number): Promise<OutboxEvent[]> =>
      (
        await sql.all<OutboxRow>('SELECT * FROM ssf_outbox WHERE stream_id = ? AND (CAST(? AS TEXT) IS NULL OR state = ?) ORDER BY id DESC LIMIT ?', [
          streamId, state, state, limit,
        ])
      ).map(toOutbox),
    /** Removes delivered and dropped rows created before `beforeSeconds`. */
    prune: async (beforeSeconds: number): Promise<number> =>
      (await sql.run("DELETE FROM ssf_outbox WHERE state IN ('delivered', 'dropped') AND created_at < ?", [beforeSeconds])).changes,
  };
}
export type SsfStore = ReturnType<typeof ssfStore>;
