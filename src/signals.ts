import type { Store } from './store/index.js';

/**
 * The four Shared Signals security events, emitted by management operations (never by the
 * OAuth endpoints). `emit` is given the store transaction that makes the change, so the event
 * is recorded exactly when the change is (the Shared Signals outbox).
 */
export const EVENT_TYPES = {
  sessionRevoked: 'https://schemas.openid.net/secevent/caep/event-type/session-revoked',
  tokenClaimsChange: 'https://schemas.openid.net/secevent/caep/event-type/token-claims-change',
  accountPurged: 'https://schemas.openid.net/secevent/risc/event-type/account-purged',
  credentialCompromise: 'https://schemas.openid.net/secevent/risc/event-type/credential-compromise',
} as const;
export type EventType = (typeof EVENT_TYPES)[keyof typeof EVENT_TYPES];
export const SUPPORTED_EVENT_TYPES: EventType[] = Object.values(EVENT_TYPES);

export interface SecurityEventInput {
  type: EventType;
  /** the person the event is about, and for session-revoked the session (`sid`) */
  subject: { user_id: string; email: string; session_id?: string };
  /** the event's own members (for example `credential_type`, `claims`, `reason_admin`); `event_timestamp` is added */
  payload: Record<string, unknown>;
  /** CAEP `initiating_entity`: `admin`, `user`, `policy` or `system` */
  initiatingEntity?: 'admin' | 'user' | 'policy' | 'system';
}

export interface SignalSink {
  /** Records the event in `tx`, the transaction of the change (a store outside one: its own transaction). */
  emit(tx: Store, event: SecurityEventInput): Promise<void>;
}
