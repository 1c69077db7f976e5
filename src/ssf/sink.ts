import { EVENT_TYPES, type EventType, type SecurityEventInput, type SignalSink } from '../signals.js';
import type { Store } from '../store/index.js';
import type { StreamRecord } from '../store/ssf.js';
import { newId, setClaims, VERIFICATION_EVENT } from './set.js';
import { nowSeconds, type Clock } from '../clock.js';
import { personSubjectId, subjectMatches, type EventSubject } from './subjects.js';

/** CAEP events must carry `initiating_entity`. */
const CAEP_EVENTS = new Set<EventType>([EVENT_TYPES.sessionRevoked, EVENT_TYPES.tokenClaimsChange]);

/** CAEP 1.0 writes `reason_admin` / `reason_user` as language-tagged objects; a plain string becomes `{en: ...}`. */
function localized(value: unknown): unknown {
  return typeof value === 'string' ? { en: value } : value;
}

/** The event object: the emitter's members, normalized, plus `event_timestamp` and `initiating_entity`. */
export function eventPayload(event: SecurityEventInput, nowSeconds: number): Record<string, unknown> {
  const payload: Record<string, unknown> = { ...event.payload };
  if ('reason_admin' in payload) payload.reason_admin = localized(payload.reason_admin);
  if ('reason_user' in payload) payload.reason_user = localized(payload.reason_user);
  // the session a session-revoked event is about, named as in our tokens' `sid` claim
  if (event.type === EVENT_TYPES.sessionRevoked && event.subject.session_id && payload.sid === undefined) {
    payload.sid = event.subject.session_id;
  }
  if (typeof payload.event_timestamp !== 'number') payload.event_timestamp = nowSeconds;
  // CAEP requires it; on RISC events it is sent when the emitter names one (receivers ignore unknown members)
  const initiating = event.initiatingEntity ?? payload.initiating_entity;
  if (initiating !== undefined) payload.initiating_entity = initiating;
  else if (CAEP_EVENTS.has(event.type)) payload.initiating_entity = 'admin';
  return payload;
}

/** Does a stream want this event: the type requested, and (when it added subjects) one of them names the person. */
async function streamWants(store: Store, stream: StreamRecord, type: string, subject: EventSubject): Promise<boolean> {
  if (!stream.events_requested.includes(type)) return false;
  const added = await store.ssf.subjects(stream.stream_id);
  return added.length === 0 || added.some((a) => subjectMatches(a.subject, subject));
}

/**
 * The Shared Signals sink. `emit` runs inside the caller's store transaction and writes one
 * outbox row per stream that wants the event: the event exists exactly when the change does.
 * The delivery worker signs and sends the rows.
 */
export function createSignalSink(opts: { issuer: string; clock: Clock }): SignalSink {
  return {
    async emit(store: Store, event: SecurityEventInput): Promise<void> {
      const t = nowSeconds(opts.clock);
      const subject: EventSubject = { issuer: opts.issuer, ...event.subject };
      const payload = eventPayload(event, t);
      // one txn for every SET this change causes, on every stream
      const txn = newId();
      await store.transaction(async (tx) => {
        for (const stream of await tx.ssf.liveStreams()) {
          if (!(await streamWants(tx, stream, event.type, subject))) continue;
          const claims = setClaims({
            issuer: opts.issuer,
            aud: stream.aud,
            txn,
            iat: t,
            subId: personSubjectId(subject, stream.subject_format),
            eventType: event.type,
            event: payload,
          });
          await tx.ssf.enqueue({ stream_id: stream.stream_id, jti: claims.jti, event_type: event.type, claims });
        }
      });
    },
  };
}

/** Records a verification event for a stream (SSF 1.0 §8.1.4): `sub_id` is the stream itself. */
export async function enqueueVerification(store: Store, issuer: string, stream: StreamRecord, state: string | undefined, iat: number): Promise<void> {
  const claims = setClaims({
    issuer,
    iat,
    aud: stream.aud,
    txn: newId(),
    subId: { format: 'opaque', id: stream.stream_id },
    eventType: VERIFICATION_EVENT,
    event: state === undefined ? {} : { state },
  });
  await store.ssf.enqueue({ stream_id: stream.stream_id, jti: claims.jti, event_type: VERIFICATION_EVENT, claims });
}
