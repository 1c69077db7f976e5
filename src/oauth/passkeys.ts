import { createHmac } from 'node:crypto';
import type { Request, Response } from 'express';
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
} from '@simplewebauthn/server';
import { decodeClientDataJSON, isoBase64URL } from '@simplewebauthn/server/helpers';
import type { AppContext } from '../context.js';
import { randomToken, sha256 } from '../crypto/hash.js';
import { cookieName } from './cookies.js';
import { cookieOptions } from './session.js';
import { passkeyStrength, type PasskeyMethod, type Strength } from './authorization-endpoint.js';
import { EVENT_TYPES } from '../signals.js';
import type { User } from '../store/users.js';
import { isUniqueViolation } from '../store/sql.js';
import type { PasskeyCredential } from '../store/passkeys.js';
import { recordAccountEvent } from '../store/account-events.js';

/** The browser a ceremony belongs to: a random value whose sha256 keys its challenges. */
export const WEBAUTHN_COOKIE = 'gatehouse_webauthn';
/** A challenge lives 5 minutes and is spent by its first use. */
export const CHALLENGE_TTL_SECONDS = 5 * 60;
/** How long the browser shows its passkey prompt. */
export const CEREMONY_TIMEOUT_MS = 2 * 60 * 1000;
/** The service's name in the passkey prompt. */
const RP_NAME = 'Gatehouse';
/** Longest credential JSON accepted from a form (an attestation `none` response is about 1 KB). */
const MAX_RESPONSE_CHARS = 16 * 1024;

/** RP ID = the issuer's host name; origin = the issuer's origin. */
export function relyingParty(ctx: AppContext): { rpID: string; origin: string } {
  const url = new URL(ctx.urls.issuer);
  return { rpID: url.hostname, origin: url.origin };
}

/** The amr method of a passkey: synced (backup eligible) keys are `swk`, device-bound ones `hwk`. */
export const passkeyMethod = (c: Pick<PasskeyCredential, 'device_type'>): PasskeyMethod =>
  c.device_type === 'multiDevice' ? 'swk' : 'hwk';

/** The RISC `credential_type` of a passkey: on the person's own device (or synced) or a roaming security key. */
export function riscCredentialType(c: Pick<PasskeyCredential, 'device_type' | 'transports'>): 'fido2-platform' | 'fido2-roaming' {
  if (c.device_type === 'multiDevice' || c.transports.includes('internal') || c.transports.includes('hybrid')) return 'fido2-platform';
  return 'fido2-roaming';
}

/** The sha256 of this browser's ceremony cookie; made (and set) when `create` and the browser has none. */
function browserBinding(ctx: AppContext, req: Request, res: Response | undefined): string | undefined {
  const name = cookieName(ctx, req, WEBAUTHN_COOKIE);
  const existing = (req.cookies as Record<string, unknown> | undefined)?.[name];
  if (typeof existing === 'string' && /^[\w-]{32,64}$/.test(existing)) return sha256(`webauthn:${existing}`);
  if (!res) return undefined;
  const value = randomToken();
  res.cookie(name, value, cookieOptions(ctx, req));
  ((req.cookies ??= {}) as Record<string, string>)[name] = value;
  return sha256(`webauthn:${value}`);
}

const decoyKeys = new WeakMap<AppContext, Buffer>();

/** A key kept in the database (one per installation) for the stand-in credential IDs below. */
async function decoyKey(ctx: AppContext): Promise<Buffer> {
  let key = decoyKeys.get(ctx);
  if (key) return key;
  await ctx.store.settings.setIfAbsent('webauthn_decoy_key', randomToken());
  key = Buffer.from((await ctx.store.settings.get('webauthn_decoy_key'))!, 'utf8');
  decoyKeys.set(ctx, key);
  return key;
}

/**
 * For an email with no passkeys (or no account): one stand-in credential ID, the same every
 * time for that email, so the answer does not tell whether the account exists or has passkeys.
 */
async function decoyCredential(ctx: AppContext, email: string): Promise<{ id: string; transports: string[] }> {
  const mac = createHmac('sha256', await decoyKey(ctx)).update(email.trim().toLowerCase()).digest();
  return { id: isoBase64URL.fromBuffer(mac), transports: ['internal'] };
}

export type AllowList =
  | { kind: 'any' }
  | { kind: 'person'; user: User }
  | { kind: 'email'; email: string; user: User | undefined };

/**
 * Options for a sign-in ceremony. `any`: discoverable credentials (the browser lists the
 * passkeys it has for us); `person` / `email`: only that person's passkeys (allowCredentials).
 * The challenge is kept for this browser and, when given, the pending authorization request.
 */
export async function signInOptions(
  ctx: AppContext,
  req: Request,
  res: Response,
  allow: AllowList,
  requestId: string | undefined,
): Promise<PublicKeyCredentialRequestOptionsJSON> {
  const { rpID } = relyingParty(ctx);
  let allowCredentials: { id: string; transports?: string[] }[] | undefined;
  let expected: string | null = null;
  if (allow.kind !== 'any') {
    const user = allow.user;
    const usable = user ? (await ctx.store.webauthn.ofUser(user.id)).filter((c) => c.suspended_at === null) : [];
    allowCredentials = usable.map((c) => ({ id: c.id, transports: c.transports }));
    if (allowCredentials.length === 0 && allow.kind === 'email') allowCredentials = [await decoyCredential(ctx, allow.email)];
    expected = user?.id ?? null;
  }
  const options = await generateAuthenticationOptions({
    rpID,
    allowCredentials,
    userVerification: 'preferred',
    timeout: CEREMONY_TIMEOUT_MS,
  });
  await ctx.store.webauthn.putChallenge(
    { challenge: options.challenge, browser_hash: browserBinding(ctx, req, res)!, purpose: 'authenticate', user_id: expected, request_id: requestId ?? null },
    CHALLENGE_TTL_SECONDS,
  );
  return options;
}

/** Options for registering a passkey: attestation `none`, the person's passkeys excluded (no duplicates). */
export async function registrationOptions(ctx: AppContext, req: Request, res: Response, user: User): Promise<PublicKeyCredentialCreationOptionsJSON> {
  const { rpID } = relyingParty(ctx);
  const handle = await ctx.store.webauthn.handleFor(user.id, () => randomToken(32));
  const existing = await ctx.store.webauthn.ofUser(user.id);
  const options = await generateRegistrationOptions({
    rpName: RP_NAME,
    rpID,
    userName: user.email,
    userDisplayName: user.name,
    userID: isoBase64URL.toBuffer(handle),
    attestationType: 'none',
    excludeCredentials: existing.map((c) => ({ id: c.id, transports: c.transports })),
    authenticatorSelection: { residentKey: 'preferred', userVerification: 'preferred' },
    timeout: CEREMONY_TIMEOUT_MS,
  });
  await ctx.store.webauthn.putChallenge(
    { challenge: options.challenge, browser_hash: browserBinding(ctx, req, res)!, purpose: 'register', user_id: user.id, request_id: null },
    CHALLENGE_TTL_SECONDS,
  );
  return options;
}

/** The credential JSON a page posted, when it has the shape of a WebAuthn response. */
function parseResponse<T>(raw: unknown, kind: 'attestationObject' | 'signature'): T | undefined {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > MAX_RESPONSE_CHARS) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (!value || typeof value !== 'object') return undefined;
  const v = value as { id?: unknown; rawId?: unknown; type?: unknown; response?: Record<string, unknown> };
  if (typeof v.id !== 'string' || !isoBase64URL.isBase64URL(v.id) || v.id.length > 1400) return undefined;
  if (v.type !== 'public-key' || !v.response || typeof v.response !== 'object') return undefined;
  if (typeof v.response.clientDataJSON !== 'string' || typeof v.response[kind] !== 'string') return undefined;
  // The optional members read here: the user handle (looked up) and the transports (kept).
  const { userHandle, transports } = v.response;
  if (userHandle !== undefined && userHandle !== null && (typeof userHandle !== 'string' || userHandle.length > 1400)) return undefined;
  if (transports !== undefined && transports !== null && !Array.isArray(transports)) return undefined;
  return value as T;
}

/** The challenge inside a response's clientDataJSON. */
function challengeOf(clientDataJSON: string): string | undefined {
  try {
    const c = decodeClientDataJSON(clientDataJSON) as { challenge?: unknown };
    return typeof c.challenge === 'string' && c.challenge.length <= 200 ? c.challenge : undefined;
  } catch {
    return undefined;
  }
}

export type SignInFailure = 'malformed' | 'challenge' | 'unknown_credential' | 'wrong_person' | 'suspended' | 'cloned' | 'invalid';

export type SignInResult =
  | { ok: true; user: User; credential: PasskeyCredential; strength: Strength }
  | { ok: false; reason: SignInFailure; userId?: string };

/**
 * Checks a sign-in ceremony's response: the challenge (this browser's, unspent, unexpired, for
 * this request), the passkey (registered, not suspended, the expected person's), then the
 * signature, origin, RP ID, user presence and counter (the library). A counter that went
 * backwards on a genuine signature means a cloned authenticator: the passkey is suspended and
 * credential-compromise is emitted.
 */
export async function verifySignIn(ctx: AppContext, req: Request, raw: unknown, requestId: string | undefined): Promise<SignInResult> {
  const response = parseResponse<AuthenticationResponseJSON>(raw, 'signature');
  if (!response) return { ok: false, reason: 'malformed' };
  const challengeValue = challengeOf(response.response.clientDataJSON);
  const binding = browserBinding(ctx, req, undefined);
  if (!challengeValue || !binding) return { ok: false, reason: 'challenge' };
  const challenge = await ctx.store.webauthn.takeChallenge(challengeValue, binding, 'authenticate');
  if (!challenge || challenge.request_id !== (requestId ?? null)) return { ok: false, reason: 'challenge' };

  const credential = await ctx.store.webauthn.get(response.id);
  if (!credential) return { ok: false, reason: 'unknown_credential' };
  if (challenge.user_id !== null && challenge.user_id !== credential.user_id) return { ok: false, reason: 'wrong_person' };
  const user = await ctx.store.users.get(credential.user_id);
  if (!user) return { ok: false, reason: 'unknown_credential' };
  const userHandle = response.response.userHandle;
  if (userHandle) {
    const owner = await ctx.store.webauthn.userOfHandle(userHandle);
    if (owner !== credential.user_id) return { ok: false, reason: 'wrong_person', userId: user.id };
  }
  if (credential.suspended_at !== null) return { ok: false, reason: 'suspended', userId: user.id };

  const { rpID, origin } = relyingParty(ctx);
  const check = (counter: number) =>
    verifyAuthenticationResponse({
      response,
      expectedChallenge: challenge.challenge,
      expectedOrigin: origin,
      expectedRPID: rpID,
      credential: { id: credential.id, publicKey: isoBase64URL.toBuffer(credential.public_key), counter, transports: credential.transports },
      requireUserVerification: false,
    });
  let verified;
  try {
    verified = await check(credential.counter);
  } catch (err) {
    // The library compares counters before the signature: a regression counts only on a genuine signature.
    if (err instanceof Error && /counter value/i.test(err.message) && (await check(0).then((v) => v.verified, () => false))) {
      await suspendCloned(ctx, user, credential);
      return { ok: false, reason: 'cloned', userId: user.id };
    }
    return { ok: false, reason: 'invalid', userId: user.id };
  }
  if (!verified.verified) return { ok: false, reason: 'invalid', userId: user.id };
  const info = verified.authenticationInfo;
  if (!(await ctx.store.webauthn.recordUse(credential.id, info.newCounter, info.credentialBackedUp))) {
    return { ok: false, reason: 'suspended', userId: user.id };
  }
  return { ok: true, user, credential, strength: passkeyStrength(passkeyMethod(credential), info.userVerified) };
}

/** A cloned authenticator: the passkey stops working and receivers hear of the compromise. */
async function suspendCloned(ctx: AppContext, user: User, credential: PasskeyCredential): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    if (!(await tx.webauthn.suspend(credential.id))) return;
    await ctx.signals.emit(tx, {
      type: EVENT_TYPES.credentialCompromise,
      subject: { user_id: user.id, email: user.email },
      payload: {
        credential_type: riscCredentialType(credential),
        reason_admin: { en: 'the passkey signature counter went backwards: the authenticator may have been cloned' },
      },
      initiatingEntity: 'system',
    });
    await recordAccountEvent(tx, user.id, 'passkey.suspended', credential.id, { name: credential.name }, 'signature counter went backwards', false);
  });
}

export type RegistrationResult =
  | { ok: true; credential: PasskeyCredential }
  | { ok: false; reason: 'malformed' | 'challenge' | 'invalid' | 'duplicate' };

/** Checks a registration ceremony's response and keeps the new passkey under `name`. */
export async function verifyRegistration(ctx: AppContext, req: Request, raw: unknown, user: User, name: string): Promise<RegistrationResult> {
  const response = parseResponse<RegistrationResponseJSON>(raw, 'attestationObject');
  if (!response) return { ok: false, reason: 'malformed' };
  const challengeValue = challengeOf(response.response.clientDataJSON);
  const binding = browserBinding(ctx, req, undefined);
  if (!challengeValue || !binding) return { ok: false, reason: 'challenge' };
  const challenge = await ctx.store.webauthn.takeChallenge(challengeValue, binding, 'register');
  if (!challenge || challenge.user_id !== user.id) return { ok: false, reason: 'challenge' };

  const { rpID, origin } = relyingParty(ctx);
  let verified;
  try {
    verified = await verifyRegistrationResponse({
      response,
      expectedChallenge: challenge.challenge,
      expectedOrigin: origin,
      expectedRPID: rpID,
      requireUserVerification: false,
    });
  } catch {
    return { ok: false, reason: 'invalid' };
  }
  if (!verified.verified) return { ok: false, reason: 'invalid' };
  const info = verified.registrationInfo;
  if (await ctx.store.webauthn.get(info.credential.id)) return { ok: false, reason: 'duplicate' };
  // Only names of the length of the known ones (usb, nfc, ble, smart-card, hybrid, internal) are kept.
  const transports = (response.response.transports ?? []).filter((t): t is string => typeof t === 'string' && t.length <= 32).slice(0, 8);
  // Two registrations of one authenticator racing: the second meets the primary key.
  const credential = await ctx.store.transaction(async (tx) => {
    const added = await tx.webauthn.add({
      id: info.credential.id,
      user_id: user.id,
      public_key: isoBase64URL.fromBuffer(info.credential.publicKey),
      counter: info.credential.counter,
      transports,
      device_type: info.credentialDeviceType,
      backed_up: info.credentialBackedUp,
      aaguid: info.aaguid,
      name,
    });
    await recordAccountEvent(tx, user.id, 'passkey.register', added.id, { name, device_type: added.device_type });
    return added;
  }).catch((err: unknown) => {
    if (isUniqueViolation(err)) return undefined;
    throw err;
  });
  if (!credential) return { ok: false, reason: 'duplicate' };
  return { ok: true, credential };
}
