import { createHash, createPublicKey, verify as verifySignature, type KeyObject } from 'node:crypto';
import { decodeProtectedHeader, type JWK, type JWTPayload } from 'jose';
import type { AppContext } from '../context.js';
import { errors, type ProtocolError } from '../errors.js';
import { nowSeconds } from '../clock.js';
import type { AccessCredential } from './bearer.js';

/**
 * DPoP (RFC 9449): the proof a client sends in the `DPoP` header, checked in this order (the
 * RFC's section 4.3): one header, a JWS with `typ: dpop+jwt`, an asymmetric `alg` we accept and
 * a public `jwk` of that algorithm's key type; the signature by that key; `htm` and `htu` those
 * of the request (the URL compared without query and fragment, against this service's public
 * URL of the endpoint); `iat` within the window; the nonce when one is sent or required; `ath`
 * and the key's thumbprint when an access token comes with it; last, `jti` single use, recorded
 * in the database so that every process and instance sees it.
 *
 * The token endpoints bind what they issue to the proof's key (`cnf.jkt`, RFC 7638); the
 * resource endpoints then want `Authorization: DPoP <token>` and a proof by the same key.
 */

/** Signature algorithms a proof may use (the metadata's list): asymmetric only. */
export const DPOP_SIGNING_ALGS = ['ES256', 'EdDSA'] as const;
/** A proof is accepted this many seconds after its `iat` (and its jti remembered that long). */
export const DPOP_PROOF_MAX_AGE_SECONDS = 60;
/** A proof may be dated this many seconds ahead (the client's clock running fast). */
export const DPOP_PROOF_MAX_FUTURE_SECONDS = 10;
/** A server nonce is good this long after it was issued. */
export const DPOP_NONCE_TTL_SECONDS = 300;
/** A proof longer than this is refused unread (an ES256 or Ed25519 proof is well under 1 KB). */
const MAX_PROOF_LENGTH = 4096;

/**
 * The key type each accepted `alg` needs. `Ed25519` is the fully specified name of EdDSA over
 * Ed25519 (RFC 9864), the one openid-client and oauth4webapi put in proofs made with Ed25519 keys.
 */
const KEY_TYPE: Record<string, { kty: string; crv: string }> = {
  ES256: { kty: 'EC', crv: 'P-256' },
  EdDSA: { kty: 'OKP', crv: 'Ed25519' },
  Ed25519: { kty: 'OKP', crv: 'Ed25519' },
};
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

/** The members of a public key that define it (RFC 7638), in their canonical order. */
function publicMembers(jwk: JWK): Record<string, string> {
  const out: Record<string, string> = { crv: String(jwk.crv), kty: String(jwk.kty), x: String(jwk.x) };
  if (jwk.kty === 'EC') out.y = String(jwk.y);
  for (const v of Object.values(out)) if (v === 'undefined') throw refuse('the DPoP proof jwk is missing a member of its key');
  return out;
}

/** The JWK thumbprint (RFC 7638, SHA-256): the hash of the required members, in order, without spaces. */
function jwkThumbprint(jwk: JWK): string {
  return createHash('sha256').update(JSON.stringify(publicMembers(jwk))).digest('base64url');
}

/** Why a proof is refused: `use_dpop_nonce` asks the client to try again with the nonce it is sent. */
export class DpopRefusal extends Error {
  constructor(
    readonly code: 'invalid_dpop_proof' | 'use_dpop_nonce',
    readonly description: string,
  ) {
    super(description);
  }
}

export interface ProofExpectation {
  /** the request's method */
  htm: string;
  /** this service's public URL of the endpoint (no query) */
  htu: string;
  /** at a resource: the access token the proof must name (`ath`) */
  accessToken?: string;
  /** at a resource: the thumbprint the access token is bound to */
  jkt?: string;
}

export interface VerifiedProof {
  /** the RFC 7638 SHA-256 thumbprint of the proof's key */
  jkt: string;
  claims: JWTPayload;
}

const refuse = (description: string) => new DpopRefusal('invalid_dpop_proof', description);

/** The `ath` of an access token: base64url of its SHA-256. */
export const accessTokenHash = (token: string) => createHash('sha256').update(token, 'ascii').digest('base64url');

/** A URL as it compares for `htu`: scheme, host and port normalised, path as given, no query or fragment. */
function comparableUrl(raw: string): string | undefined {
  try {
    const u = new URL(raw);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return undefined;
  }
}

/**
 * Does the proof's `htu` name the endpoint? The endpoint's own URL is already in the compared
 * form (this service's public URL, no query), so a client that copies it, as clients do, matches
 * without parsing either; any other spelling is compared once both are parsed.
 */
function sameEndpoint(htu: unknown, endpoint: string): boolean {
  if (typeof htu !== 'string') return false;
  if (htu === endpoint && endpointForms.get(endpoint) === endpoint) return true;
  let expected = endpointForms.get(endpoint);
  if (expected === undefined) {
    expected = comparableUrl(endpoint) ?? '';
    if (endpointForms.size >= 64) endpointForms.clear();
    endpointForms.set(endpoint, expected);
  }
  const given = comparableUrl(htu);
  return given !== undefined && given === expected;
}
/** The compared form of each endpoint URL asked about (a handful: this service's endpoints). */
const endpointForms = new Map<string, string>();

/** What a proof's protected header comes to once checked: its key, ready to verify with, and the key's thumbprint. */
interface ProofKey {
  kty: string;
  key: KeyObject;
  jkt: string;
}

/**
 * Checked headers by their encoded text. A client signs every proof with the same key, so its
 * header is the same string each time; reading the JWK into a key costs more than verifying the
 * signature, and is done once per header. Bounded: the oldest header is dropped first.
 */
const proofKeys = new Map<string, ProofKey>();
const MAX_PROOF_KEYS = 1024;

/** The header's checks (typ, alg, a public jwk of the alg's key type): the key, or a DpopRefusal. */
function proofKeyOf(proof: string, encodedHeader: string): ProofKey {
  const known = proofKeys.get(encodedHeader);
  if (known) return known;
  let protectedHeader: ReturnType<typeof decodeProtectedHeader>;
  try {
    protectedHeader = decodeProtectedHeader(proof);
  } catch {
    throw refuse('the DPoP proof header cannot be read');
  }
  if (protectedHeader.typ !== 'dpop+jwt') throw refuse('the DPoP proof must have typ dpop+jwt');
  const alg = protectedHeader.alg;
  if (alg === undefined || !Object.hasOwn(KEY_TYPE, alg)) throw refuse(`the DPoP proof alg must be one of ${DPOP_SIGNING_ALGS.join(', ')}`);
  const jwk = protectedHeader.jwk as JWK | undefined;
  if (!jwk || typeof jwk !== 'object' || Array.isArray(jwk)) throw refuse('the DPoP proof header must carry the public key as jwk');
  if (PRIVATE_MEMBERS.some((m) => m in jwk)) throw refuse('the DPoP proof jwk must be a public key');
  const want = KEY_TYPE[alg]!;
  if (jwk.kty !== want.kty || jwk.crv !== want.crv) throw refuse(`the DPoP proof jwk must be an ${want.kty} ${want.crv} key for ${alg}`);
  if (protectedHeader.crit !== undefined || protectedHeader.b64 !== undefined) throw refuse('the DPoP proof header may not carry crit or b64');
  // The key is made from the JWK's public members only.
  let key: KeyObject;
  try {
    key = createPublicKey({ key: publicMembers(jwk), format: 'jwk' });
  } catch {
    throw refuse('the DPoP proof jwk is not a usable public key');
  }
  const checked = { kty: want.kty, key, jkt: jwkThumbprint(jwk) };
  if (proofKeys.size >= MAX_PROOF_KEYS) proofKeys.delete(proofKeys.keys().next().value!);
  proofKeys.set(encodedHeader, checked);
  return checked;
}

/** Verifies the `DPoP` header of a request against what the request is; throws a DpopRefusal. */
export async function verifyDpopProof(ctx: AppContext, header: string, expect: ProofExpectation): Promise<VerifiedProof> {
  // 1. One proof, a compact JWS
  if (header.length > MAX_PROOF_LENGTH) throw refuse('the DPoP proof is too long');
  if (/[\s,]/.test(header.trim())) throw refuse('exactly one DPoP header is allowed');
  const proof = header.trim();
  const parts = proof.split('.');
  if (parts.length !== 3) throw refuse('the DPoP proof is not a JWT');
  const [encodedHeader, encodedPayload, encodedSignature] = parts as [string, string, string];

  // 2. Header: typ, alg, a public key of the alg's type
  const { kty, key, jkt } = proofKeyOf(proof, encodedHeader);

  // 3. Signature, with node:crypto on the JWS signing input (a proof is verified on every DPoP
  // request: no WebCrypto round trip)
  let verified = false;
  try {
    const input = Buffer.from(`${encodedHeader}.${encodedPayload}`);
    const signature = Buffer.from(encodedSignature, 'base64url');
    verified = kty === 'EC' ? verifySignature('sha256', input, { key, dsaEncoding: 'ieee-p1363' }, signature) : verifySignature(null, input, key, signature);
  } catch {
    verified = false;
  }
  if (!verified) throw refuse('the DPoP proof signature does not verify');
  let claims: JWTPayload;
  try {
    claims = JSON.parse(Buffer.from(encodedPayload, 'base64url').toString('utf8')) as JWTPayload;
  } catch {
    throw refuse('the DPoP proof claims cannot be read');
  }
  if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) throw refuse('the DPoP proof claims cannot be read');

  // 4. What the request is: method, URL
  if (typeof claims.jti !== 'string' || claims.jti.length === 0 || claims.jti.length > 256) throw refuse('the DPoP proof needs a jti');
  if (claims.htm !== expect.htm) throw refuse(`the DPoP proof htm must be ${expect.htm}`);
  if (!sameEndpoint(claims.htu, expect.htu)) throw refuse(`the DPoP proof htu must be ${expect.htu}`);

  // 5. When it was made
  const now = nowSeconds(ctx.clock);
  if (typeof claims.iat !== 'number' || !Number.isFinite(claims.iat)) throw refuse('the DPoP proof needs an iat');
  if (claims.iat < now - DPOP_PROOF_MAX_AGE_SECONDS) throw refuse('the DPoP proof is too old; make a fresh one');
  if (claims.iat > now + DPOP_PROOF_MAX_FUTURE_SECONDS) throw refuse('the DPoP proof is dated in the future');

  // 6. The server nonce: checked whenever sent, wanted when the service requires it
  if (claims.nonce !== undefined || ctx.config.dpopNonce === 'required') {
    if (typeof claims.nonce !== 'string' || !nonceIsCurrent(ctx, claims.nonce)) {
      throw new DpopRefusal('use_dpop_nonce', 'the DPoP proof must carry the nonce given in the DPoP-Nonce header');
    }
  }

  // 7. At a resource: the access token and its key
  if (expect.accessToken !== undefined) {
    if (typeof claims.ath !== 'string') throw refuse('the DPoP proof needs ath, the hash of the access token');
    if (claims.ath !== accessTokenHash(expect.accessToken)) throw refuse('the DPoP proof ath does not match the access token');
  }
  if (expect.jkt !== undefined && jkt !== expect.jkt) throw refuse('the DPoP proof key is not the key the access token is bound to');

  // 8. Single use, across processes and instances: remembered for as long as it could be accepted
  const keyHash = createHash('sha256').update(`${jkt}:${claims.jti}`).digest('base64url');
  if (!(await ctx.store.dpop.useProof(keyHash, claims.iat + DPOP_PROOF_MAX_AGE_SECONDS + 1))) {
    throw refuse('the DPoP proof was already used; make a fresh one for each request');
  }
  return { jkt, claims };
}

// ---- server nonces -------------------------------------------------------------------

/**
 * Nonces are sealed with the service's secret box: any process or instance sharing the secret
 * reads them, none keeps state. The current one is reused for a tenth of its lifetime.
 */
const currentNonces = new WeakMap<AppContext, { nonce: string; issuedAt: number }>();
const NONCE_PREFIX = 'dpop-nonce:';

export function currentDpopNonce(ctx: AppContext): string {
  const now = nowSeconds(ctx.clock);
  const cur = currentNonces.get(ctx);
  if (cur && now - cur.issuedAt < DPOP_NONCE_TTL_SECONDS / 10) return cur.nonce;
  const nonce = ctx.box.seal(`${NONCE_PREFIX}${now}`);
  currentNonces.set(ctx, { nonce, issuedAt: now });
  return nonce;
}

function nonceIsCurrent(ctx: AppContext, nonce: string): boolean {
  if (nonce.length > 200) return false;
  try {
    const plain = ctx.box.open(nonce);
    if (!plain.startsWith(NONCE_PREFIX)) return false;
    const issuedAt = Number(plain.slice(NONCE_PREFIX.length));
    const now = nowSeconds(ctx.clock);
    return Number.isInteger(issuedAt) && issuedAt <= now + DPOP_PROOF_MAX_FUTURE_SECONDS && now - issuedAt <= DPOP_NONCE_TTL_SECONDS;
  } catch {
    return false;
  }
}

// ---- the token endpoints -------------------------------------------------------------

interface HeaderSource {
  get(name: string): string | undefined;
}

/**
 * The key a token endpoint binds its tokens to: the thumbprint of the request's verified `DPoP`
 * proof, or undefined when none was sent and `required` is false. A proof that fails is
 * `invalid_dpop_proof` (400); a nonce wanted is `use_dpop_nonce` (400) with `DPoP-Nonce`.
 */
export async function tokenRequestBinding(ctx: AppContext, req: HeaderSource, htu: string, required: boolean): Promise<string | undefined> {
  const header = req.get('dpop');
  if (header === undefined || header === '') {
    if (required) throw errors.invalidDpopProof('this client must send a DPoP proof with its token requests (dpop_bound_access_tokens)');
    return undefined;
  }
  try {
    return (await verifyDpopProof(ctx, header, { htm: 'POST', htu })).jkt;
  } catch (err) {
    if (!(err instanceof DpopRefusal)) throw err;
    if (err.code === 'use_dpop_nonce') throw errors.useDpopNonce(err.description, {}, { 'DPoP-Nonce': currentDpopNonce(ctx) });
    throw errors.invalidDpopProof(err.description);
  }
}

/** `cnf` of a bound token (RFC 9449 section 6.1). */
export const confirmation = (jkt: string | undefined) => (jkt ? { cnf: { jkt } } : {});

/** The key an access token is bound to, from its claims. */
export function boundKey(claims: JWTPayload): string | undefined {
  const cnf = claims.cnf as { jkt?: unknown } | undefined;
  return cnf && typeof cnf === 'object' && typeof cnf.jkt === 'string' ? cnf.jkt : undefined;
}

// ---- the resource endpoints ----------------------------------------------------------

const quoted = (s: string) => s.replace(/[^\x20-\x7e]|["\\]/g, '');

/** The `WWW-Authenticate: DPoP` challenge of RFC 9449 section 7.1, with any parameters the door adds. */
export function dpopChallenge(error: string | undefined, description: string | undefined, extra = ''): string {
  const params = [
    ...(error ? [`error="${error}"`] : []),
    ...(description ? [`error_description="${quoted(description)}"`] : []),
    `algs="${DPOP_SIGNING_ALGS.join(' ')}"`,
  ];
  return `DPoP ${params.join(', ')}${extra ? `, ${extra}` : ''}`;
}

/**
 * The `WWW-Authenticate` of a token refused under the scheme it came with: under `DPoP` a DPoP
 * challenge (RFC 9449 section 7.1, with the door's own parameters in `extra`), under `Bearer`
 * the door's `bearer` challenge.
 */
export function refusedTokenChallenge(scheme: AccessCredential['scheme'] | undefined, description: string | undefined, bearer: string, extra = ''): { 'WWW-Authenticate': string } {
  return { 'WWW-Authenticate': scheme === 'DPoP' ? dpopChallenge('invalid_token', description, extra) : bearer };
}

/**
 * The sender constraint at a resource, once the door has verified the token itself: a bound
 * token must come as `Authorization: DPoP` with a proof by its key for this request (`ath`
 * included); an unbound one must come as `Bearer` (a `DPoP` scheme claims a binding the token
 * does not have). A bound token sent as `Bearer` is refused like a missing proof. Throws a 401
 * with a `WWW-Authenticate: DPoP` challenge (`extraChallenge` appended, e.g. the MCP gateway's
 * `resource_metadata`).
 */
export async function checkSenderConstraint(
  ctx: AppContext,
  req: HeaderSource,
  credential: AccessCredential,
  claims: JWTPayload,
  where: { htm: string; htu: string; extraChallenge?: string },
): Promise<void> {
  const jkt = boundKey(claims);
  const fail = (error: 'invalid_token' | 'invalid_dpop_proof', description: string): ProtocolError => {
    const make = error === 'invalid_token' ? errors.invalidToken : errors.resourceInvalidDpopProof;
    return make(description, {}, { 'WWW-Authenticate': dpopChallenge(error, description, where.extraChallenge) });
  };
  if (jkt === undefined) {
    if (credential.scheme === 'DPoP') throw fail('invalid_token', 'the access token is not DPoP-bound; send it as a Bearer token');
    return;
  }
  if (credential.scheme !== 'DPoP') throw fail('invalid_token', 'the access token is DPoP-bound: send it as Authorization: DPoP with a DPoP proof');
  const header = req.get('dpop');
  if (header === undefined || header === '') throw fail('invalid_dpop_proof', 'a DPoP proof is required with a DPoP-bound access token');
  try {
    await verifyDpopProof(ctx, header, { htm: where.htm, htu: where.htu, accessToken: credential.token, jkt });
  } catch (err) {
    if (!(err instanceof DpopRefusal)) throw err;
    if (err.code === 'use_dpop_nonce') {
      throw errors.resourceUseDpopNonce(err.description, {}, {
        'WWW-Authenticate': dpopChallenge('use_dpop_nonce', err.description, where.extraChallenge),
        'DPoP-Nonce': currentDpopNonce(ctx),
      });
    }
    throw fail('invalid_dpop_proof', err.description);
  }
}
