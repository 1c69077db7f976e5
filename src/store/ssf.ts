import type { Db } from './db.js';
import { bool, now, parseJson } from './util.js';

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

export function ssfStore(db: Db) {
  const insertStream = db.prepare(
    `INSERT INTO ssf_streams (stream_id, aud, delivery_method, endpoint_url, authorization_header_enc, events_requested,
       description, subject_format, status, created_at, updated_at)
     VALUES (@stream_id, @aud, @delivery_method, @endpoint_url, @authorization_header_enc, @events_requested,
       @description, @subject_format, 'enabled', @t, @t)`,
  );
  const updateStream = db.prepare(
    `UPDATE ssf_streams SET aud = @aud, delivery_method = @delivery_method, endpoint_url = @endpoint_url,
       authorization_header_enc = @authorization_header_enc, events_requested = @events_requested,
       description = @description, subject_format = @subject_format, updated_at = @t
     WHERE stream_id = @stream_id`,
  );
  const streamById = db.prepare<[string], StreamRow>('SELECT * FROM ssf_streams WHERE stream_id = ?');
  const streamByEndpoint = db.prepare<[string], StreamRow>('SELECT * FROM ssf_streams WHERE endpoint_url = ?');
  const allStreams = db.prepare<[], StreamRow>('SELECT * FROM ssf_streams ORDER BY created_at, stream_id');
  const liveStreams = db.prepare<[], StreamRow>(
    "SELECT * FROM ssf_streams WHERE status IN ('enabled', 'paused') ORDER BY created_at, stream_id",
  );
  const deleteStream = db.prepare('DELETE FROM ssf_streams WHERE stream_id = ?');
  const setStatus = db.prepare('UPDATE ssf_streams SET status = ?, status_reason = ?, updated_at = ? WHERE stream_id = ?');

  const addSubject = db.prepare(
    `INSERT INTO ssf_stream_subjects (stream_id, subject_key, subject, verified, created_at) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (stream_id, subject_key) DO UPDATE SET verified = excluded.verified`,
  );
  const removeSubject = db.prepare('DELETE FROM ssf_stream_subjects WHERE stream_id = ? AND subject_key = ?');
  const subjectsOf = db.prepare<[string], { subject: string; verified: number }>(
    'SELECT subject, verified FROM ssf_stream_subjects WHERE stream_id = ? ORDER BY created_at, subject_key',
  );

  const insertOutbox = db.prepare(
    `INSERT INTO ssf_outbox (stream_id, jti, event_type, claims, state, attempts, next_attempt_at, created_at)
     VALUES (@stream_id, @jti, @event_type, @claims, 'pending', 0, @next_attempt_at, @created_at)`,
  );
  // Only enabled streams are delivered to; a paused stream's rows wait (SSF: held, sent once enabled).
  // At most `perStream` rows of each stream, so one stream's backlog cannot starve the others.
  const due = db.prepare<[number, number, number], OutboxRow>(
    `SELECT * FROM (
       SELECT o.*, ROW_NUMBER() OVER (PARTITION BY o.stream_id ORDER BY o.id) AS rn
       FROM ssf_outbox o JOIN ssf_streams s ON s.stream_id = o.stream_id
       WHERE o.state = 'pending' AND o.next_attempt_at <= ? AND s.status = 'enabled'
     ) WHERE rn <= ? ORDER BY id LIMIT ?`,
  );
  const nextDueAt = db.prepare<[], { at: number | null }>(
    `SELECT MIN(o.next_attempt_at) AS at FROM ssf_outbox o JOIN ssf_streams s ON s.stream_id = o.stream_id
     WHERE o.state = 'pending' AND s.status = 'enabled'`,
  );
  const backlog = db.prepare<[], number>("SELECT COUNT(*) FROM ssf_outbox WHERE state = 'pending'").pluck();
  const markDelivered = db.prepare(
    "UPDATE ssf_outbox SET state = 'delivered', attempts = attempts + 1, delivered_at = ?, last_error = NULL WHERE id = ? AND state = 'pending'",
  );
  const markRetry = db.prepare(
    "UPDATE ssf_outbox SET attempts = attempts + 1, next_attempt_at = ?, last_error = ? WHERE id = ? AND state = 'pending'",
  );
  const postponeStream = db.prepare(
    "UPDATE ssf_outbox SET next_attempt_at = MAX(next_attempt_at, ?) WHERE stream_id = ? AND state = 'pending'",
  );
  const markFailed = db.prepare(
    "UPDATE ssf_outbox SET state = 'failed', attempts = attempts + 1, last_error = ? WHERE id = ? AND state = 'pending'",
  );
  const dropPending = db.prepare("UPDATE ssf_outbox SET state = 'dropped', last_error = ? WHERE stream_id = ? AND state = 'pending'");
  const retryFailed = db.prepare(
    "UPDATE ssf_outbox SET state = 'pending', attempts = 0, next_attempt_at = ? WHERE stream_id = ? AND state = 'failed'",
  );
  const listEvents = db.prepare<[string, string | null, string | null, number], OutboxRow>(
    `SELECT * FROM ssf_outbox WHERE stream_id = ? AND (? IS NULL OR state = ?) ORDER BY id DESC LIMIT ?`,
  );
  const pruneDelivered = db.prepare("DELETE FROM ssf_outbox WHERE state IN ('delivered', 'dropped') AND created_at < ?");

  const streamParams = (id: string, f: StreamFields) => ({
    stream_id: id,
    aud: JSON.stringify(f.aud),
    delivery_method: f.delivery_method,
    endpoint_url: f.endpoint_url,
    authorization_header_enc: f.authorization_header_enc,
    events_requested: JSON.stringify(f.events_requested),
    description: f.description,
    subject_format: f.subject_format,
    t: now(),
  });

  return {
    createStream(id: string, f: StreamFields): StreamRecord {
      insertStream.run(streamParams(id, f));
      return toStream(streamById.get(id)!);
    },
    updateStream(id: string, f: StreamFields): StreamRecord | undefined {
      updateStream.run(streamParams(id, f));
      const r = streamById.get(id);
      return r && toStream(r);
    },
    getStream(id: string): StreamRecord | undefined {
      const r = streamById.get(id);
      return r && toStream(r);
    },
    streamByEndpoint(url: string): StreamRecord | undefined {
      const r = streamByEndpoint.get(url);
      return r && toStream(r);
    },
    listStreams: (): StreamRecord[] => allStreams.all().map(toStream),
    /** Streams that take new events: enabled or paused (a disabled stream holds nothing). */
    liveStreams: (): StreamRecord[] => liveStreams.all().map(toStream),
    deleteStream: (id: string): boolean => deleteStream.run(id).changes === 1,
    /** Sets the status; moving to `disabled` drops the events still waiting for the stream. */
    setStatus(id: string, status: StreamStatus, reason: string | null): boolean {
      const changed = setStatus.run(status, reason, now(), id).changes === 1;
      if (changed && status === 'disabled') dropPending.run('stream disabled', id);
      return changed;
    },

    addSubject: (streamId: string, key: string, subject: unknown, verified: boolean): void =>
      void addSubject.run(streamId, key, JSON.stringify(subject), verified ? 1 : 0, now()),
    removeSubject: (streamId: string, key: string): boolean => removeSubject.run(streamId, key).changes === 1,
    subjects: (streamId: string): StreamSubject[] =>
      subjectsOf.all(streamId).map((r) => ({ subject: parseJson(r.subject, {}), verified: bool(r.verified) })),

    enqueue(e: { stream_id: string; jti: string; event_type: string; claims: Record<string, unknown> }): void {
      const t = Date.now();
      insertOutbox.run({ ...e, claims: JSON.stringify(e.claims), next_attempt_at: t, created_at: Math.floor(t / 1000) });
    },
    due: (nowMs: number, perStream: number, limit: number): OutboxEvent[] =>
      due.all(nowMs, perStream, limit).map(({ rn: _rn, ...r }: OutboxRow & { rn?: number }) => toOutbox(r)),
    /** When the next pending row of an enabled stream comes due (ms), if any. */
    nextDueAt: (): number | null => nextDueAt.get()?.at ?? null,
    /** Events waiting for delivery, over every stream (the metrics' backlog). */
    backlog: (): number => backlog.get() ?? 0,
    markDelivered: (id: number): boolean => markDelivered.run(now(), id).changes === 1,
    /**
     * Counts a failed attempt and schedules the next. The stream's other pending rows wait as
     * long (a receiver that is down is not tried once per row), which also keeps them in order.
     */
    markRetry(id: number, streamId: string, nextAttemptAt: number, error: string): boolean {
      return db.transaction(() => {
        const changed = markRetry.run(nextAttemptAt, error, id).changes === 1;
        if (changed) postponeStream.run(nextAttemptAt, streamId);
        return changed;
      }).immediate();
    },
    markFailed: (id: number, error: string): boolean => markFailed.run(error, id).changes === 1,
    /** Puts a stream's failed events back in the queue, with their attempts reset. */
    retryFailed: (streamId: string): number => retryFailed.run(Date.now(), streamId).changes,
    events: (streamId: string, state: OutboxState | null, limit: number): OutboxEvent[] =>
      listEvents.all(streamId, state, state, limit).map(toOutbox),
    /** Removes delivered and dropped rows created before `beforeSeconds`. */
    prune: (beforeSeconds: number): number => pruneDelivered.run(beforeSeconds).changes,
  };
}
export type SsfStore = ReturnType<typeof ssfStore>;
