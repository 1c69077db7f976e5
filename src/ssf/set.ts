import { randomUUID } from 'node:crypto';
import type { JWTPayload } from 'jose';
import type { SigningKeys } from '../crypto/signing.js';
import type { SubjectId } from './subjects.js';

export const VERIFICATION_EVENT = 'https://schemas.openid.net/secevent/ssf/event-type/verification';
export const SET_TYP = 'secevent+jwt';
export const SET_CONTENT_TYPE = 'application/secevent+jwt';

/** The claims of one Security Event Token (RFC 8417 as SSF 1.0 profiles it): no `sub`, no `exp`. */
export interface SetClaims extends JWTPayload {
  iss: string;
  iat: number;
  jti: string;
  aud: string | string[];
  txn: string;
  sub_id: SubjectId;
  events: Record<string, Record<string, unknown>>;
}

/** A fresh identifier for a SET (`jti`) or for the change behind one or more SETs (`txn`). */
export const newId = (): string => randomUUID();

/**
 * The claim set of one SET carrying exactly one event. Built when the event is recorded, so
 * every delivery attempt sends the same `jti`, `iat` and `txn`.
 */
export function setClaims(p: {
  issuer: string;
  aud: string | string[];
  txn: string;
  subId: SubjectId;
  eventType: string;
  event: Record<string, unknown>;
  /** when the event happened, from the service's clock */
  iat: number;
}): SetClaims {
  return {
    iss: p.issuer,
    iat: p.iat,
    jti: newId(),
    aud: p.aud,
    txn: p.txn,
    sub_id: p.subId,
    events: { [p.eventType]: p.event },
  };
}

/** Signs a recorded claim set with the JWK Set's active RS256 key, `typ: secevent+jwt`. */
export function signSet(keys: SigningKeys, claims: SetClaims): Promise<string> {
  const { sub: _sub, exp: _exp, ...rest } = claims;
  return keys.sign('RS256', rest, SET_TYP);
}
