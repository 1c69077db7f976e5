import { createPrivateKey, createPublicKey, generateKeyPair, randomBytes, sign as signBytes, verify as verifyBytes, webcrypto, X509Certificate, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import {
  calculateJwkThumbprint,
  errors as joseErrors,
  exportJWK,
  type JWK,
  type JWTHeaderParameters,
  type JWTPayload,
  type JWTVerifyOptions,
  type JWTVerifyResult,
} from 'jose';
import type { SecretBox } from './secret-box.js';
import { RETIRED_KEY_PUBLISHED_SECONDS, type KeysStore, type SigningKeyRow } from '../store/keys.js';
import type { Store } from '../store/index.js';
import type { SettingsStore } from '../store/settings.js';

export type SigningAlg = 'RS256' | 'EdDSA';
export const SIGNING_ALGS: SigningAlg[] = ['RS256', 'EdDSA'];


const genKeyPair = promisify(generateKeyPair);

interface ActiveKey { kid: string; alg: SigningAlg; privateKey: KeyObject }

/** An active key's X.509 certificate (PEM and DER) and a signer of bytes with that key (RSA-SHA256). */
export interface KeyCertificate { kid: string; pem: string; der: Buffer; sign(data: string | Buffer): Buffer }

/**
 * The only module that touches private keys. Keys live encrypted in SQLite; each process
 * keeps the active ones decrypted in memory and reloads when the `keys` change counter moves.
 */
export class SigningKeys {
  private active = new Map<SigningAlg, ActiveKey>();
  private publicByKid = new Map<string, { alg: SigningAlg; key: KeyObject }>();
  private loadedVersion = -1;
  private jwksCache: { at: number; keys: JWK[] } | undefined;

  constructor(
    private readonly keys: KeysStore,
    private readonly settings: SettingsStore,
    private readonly box: SecretBox,
    /** the service's clock, in Unix seconds: key creation, rotation and the validity of tokens it verifies */
    private readonly clock: () => number,
  ) {}

  /** Makes one key per algorithm when none is active (first start). */
  async ensureKeys(): Promise<void> {
    const have = new Set((await this.keys.active()).map((k) => k.alg));
    for (const alg of SIGNING_ALGS) if (!have.has(alg)) await this.createKey(alg);
  }

  /**
   * New keys for the named algorithms, stored in one transaction of `store` (with `record`,
   * the change's audit record, when given); the previous ones sign no more but stay published
   * for 24 hours. The keys are generated before the transaction: an RSA key takes a while.
   */
  async rotate(
    store: Store,
    algs: SigningAlg[] = SIGNING_ALGS,
    record?: (tx: Store, made: { kid: string; alg: SigningAlg }[]) => Promise<void>,
  ): Promise<{ kid: string; alg: SigningAlg }[]> {
    const rows: Omit<SigningKeyRow, 'retired_at'>[] = [];
    for (const alg of algs) rows.push(await this.makeKey(alg));
    const made = rows.map((r) => ({ kid: r.kid, alg: r.alg as SigningAlg }));
    await store.transaction(async (tx) => {
      for (const row of rows) await tx.keys.add(row);
      await tx.settings.bump('keys');
      await record?.(tx, made);
    });
    return made;
  }

  private async createKey(alg: SigningAlg): Promise<{ kid: string; alg: SigningAlg }> {
    const row = await this.makeKey(alg);
    await this.keys.add(row);
    // this process sees its own rotation at once (the change feed moves on commit)
    await this.settings.bump('keys');
    return { kid: row.kid, alg };
  }

  /** A new key, sealed and ready to store. */
  private async makeKey(alg: SigningAlg): Promise<Omit<SigningKeyRow, 'retired_at'>> {
    const { privateKey, publicKey } =
      alg === 'RS256'
        ? await genKeyPair('rsa', { modulusLength: 2048 })
        : await genKeyPair('ed25519');
    const jwk = await exportJWK(publicKey);
    const kid = await calculateJwkThumbprint(jwk, 'sha256');
    const publicJwk = { ...jwk, kid, alg, use: 'sig' };
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    return { kid, alg, public_jwk: JSON.stringify(publicJwk), private_enc: this.box.seal(pem), created_at: this.clock() };
  }

  private reloading: Promise<void> | undefined;

  /**
   * Follows the `keys` change stamp (read at most once per event-loop turn, or pushed by the
   * database): under load many signatures share one read, and a rotation made by another
   * process or instance is seen at once after it commits.
   */
  private async refresh(): Promise<void> {
    const version = await this.settings.version('keys');
    if (version === this.loadedVersion) return;
    // One reload at a time; callers arriving meanwhile wait for it.
    this.reloading ??= this.reload(version).finally(() => (this.reloading = undefined));
    await this.reloading;
  }

  private async reload(version: number): Promise<void> {
    const active = new Map<SigningAlg, ActiveKey>();
    for (const row of await this.keys.active()) {
      if (active.has(row.alg)) continue; // newest first
      active.set(row.alg, { kid: row.kid, alg: row.alg, privateKey: createPrivateKey(this.box.open(row.private_enc)) });
    }
    this.active = active;
    this.publicByKid.clear();
    this.jwksCache = undefined;
    this.loadedVersion = version;
  }

  private published(): Promise<SigningKeyRow[]> {
    return this.keys.published(this.clock(), RETIRED_KEY_PUBLISHED_SECONDS);
  }

  /** The JWK Set: public members only, active keys and those retired less than 24 hours ago. */
  async jwks(): Promise<{ keys: JWK[] }> {
    await this.refresh();
    const t = this.clock();
    if (!this.jwksCache || t - this.jwksCache.at >= 60) {
      this.jwksCache = { at: t, keys: (await this.published()).map((r) => JSON.parse(r.public_jwk) as JWK) };
    }
    return { keys: this.jwksCache.keys };
  }

  private certificates = new Map<string, Promise<KeyCertificate>>();

  /**
   * The active `alg` key's self-signed X.509 certificate (SHA-256 with RSA, CN = `subjectCn`, valid
   * 10 years from the key's creation) for SAML metadata, and `sign` (RSA-SHA256 of bytes, for XML
   * signatures) so the key itself never leaves this module. Made once per key and kept in settings
   * `saml_cert:<kid>` (first writer wins): every worker and every restart serves the same certificate.
   */
  async certificate(alg: 'RS256', subjectCn: string): Promise<KeyCertificate> {
    await this.refresh();
    const k = this.active.get(alg);
    if (!k) throw new Error(`no active ${alg} signing key`);
    let made = this.certificates.get(k.kid);
    if (made) return made;
    made = (async () => {
      const settingKey = `saml_cert:${k.kid}`;
      if (!(await this.settings.get(settingKey))) {
        await import('reflect-metadata'); // @peculiar/x509 needs the Reflect polyfill loaded first
        const x509 = await import('@peculiar/x509');
        const algorithm = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
        const der = (type: 'pkcs8' | 'spki') =>
          type === 'pkcs8' ? k.privateKey.export({ type, format: 'der' }) : createPublicKey(k.privateKey).export({ type, format: 'der' });
        const keys = {
          privateKey: await webcrypto.subtle.importKey('pkcs8', der('pkcs8'), algorithm, false, ['sign']),
          publicKey: await webcrypto.subtle.importKey('spki', der('spki'), algorithm, true, ['verify']),
        };
        const createdAt = new Date(((await this.keys.active()).find((r) => r.kid === k.kid)?.created_at ?? this.clock()) * 1000);
        const notAfter = new Date(createdAt);
        notAfter.setUTCFullYear(notAfter.getUTCFullYear() + 10);
        type SelfSigned = Parameters<typeof x509.X509CertificateGenerator.createSelfSigned>;
        const cert = await x509.X509CertificateGenerator.createSelfSigned(
          {
            serialNumber: `01${randomBytes(15).toString('hex')}`, // positive, unpredictable
            name: [{ CN: [subjectCn] }],
            notBefore: createdAt,
            notAfter,
            signingAlgorithm: algorithm,
            keys: keys as SelfSigned[0]['keys'],
            extensions: [new x509.BasicConstraintsExtension(false, undefined, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true)],
          },
          webcrypto as unknown as SelfSigned[1],
        );
        await this.settings.setIfAbsent(settingKey, cert.toString('pem'));
      }
      const pem = (await this.settings.get(settingKey))!;
      return { kid: k.kid, pem, der: Buffer.from(new X509Certificate(pem).raw), sign: (data: string | Buffer) => signBytes('sha256', Buffer.from(data), k.privateKey) };
    })();
    made.catch(() => this.certificates.delete(k.kid));
    this.certificates.set(k.kid, made);
    return made;
  }

  async activeKid(alg: SigningAlg): Promise<string> {
    await this.refresh();
    const k = this.active.get(alg);
    if (!k) throw new Error(`no active ${alg} signing key`);
    return k.kid;
  }

  /**
   * Signs claims as a JWT with the active key of `alg`; `typ` goes into the header.
   * node:crypto's one-shot sign with a callback runs on libuv's thread pool: the event loop
   * keeps serving while RSA works, and one process signs on every core.
   */
  async sign(alg: SigningAlg, claims: JWTPayload, typ?: string): Promise<string> {
    const { input, key } = await this.signingInput(alg, claims, typ);
    const signature = await new Promise<Buffer>((resolve, reject) =>
      signBytes(alg === 'RS256' ? 'sha256' : null, Buffer.from(input), key, (err, sig) => (err ? reject(err) : resolve(sig))),
    );
    return `${input}.${signature.toString('base64url')}`;
  }

  private async signingInput(alg: SigningAlg, claims: JWTPayload, typ?: string): Promise<{ input: string; key: KeyObject }> {
    await this.refresh();
    const k = this.active.get(alg);
    if (!k) throw new Error(`no active ${alg} signing key`);
    const header = { alg, kid: k.kid, ...(typ ? { typ } : {}) };
    return { input: `${b64json(header)}.${b64json(claims)}`, key: k.privateKey };
  }

  /** A published key by kid: from memory, else from the database (a key just made elsewhere is found at once). */
  private async publicKey(kid: string): Promise<{ alg: SigningAlg; key: KeyObject } | undefined> {
    let k = this.publicByKid.get(kid);
    if (k) return k;
    const row = (await this.published()).find((r) => r.kid === kid);
    if (!row) return undefined;
    k = { alg: row.alg, key: createPublicKey({ key: JSON.parse(row.public_jwk), format: 'jwk' }) };
    this.publicByKid.set(kid, k);
    return k;
  }

  /**
   * Verifies a JWT this service signed. Only `alg` is accepted (no `none`, no confusion
   * between algorithms), and the key is chosen by `kid` among the published keys of that
   * alg. Claims are checked as jose's jwtVerify does (issuer, audience, typ, exp, nbf,
   * required claims), and failures throw jose's error classes.
   */
  async verify(token: string, alg: SigningAlg, options: Omit<JWTVerifyOptions, 'algorithms'> = {}): Promise<JWTVerifyResult> {
    await this.refresh();
    const parts = typeof token === 'string' ? token.split('.') : [];
    if (parts.length !== 3) throw new joseErrors.JWSInvalid('Invalid Compact JWS');
    const [h, p, sig] = parts as [string, string, string];
    const header = decodeJsonPart<JWTHeaderParameters>(h, 'header');
    if (header.alg !== alg) throw new joseErrors.JOSEAlgNotAllowed('"alg" (Algorithm) Header Parameter value not allowed');
    if (header.crit !== undefined) throw new joseErrors.JWSInvalid('"crit" is not supported');
    const k = typeof header.kid === 'string' ? await this.publicKey(header.kid) : undefined;
    if (!k || k.alg !== alg) throw new joseErrors.JWKSNoMatchingKey('no published key matches the token');
    const ok = verifyBytes(alg === 'RS256' ? 'sha256' : null, Buffer.from(`${h}.${p}`), k.key, Buffer.from(sig, 'base64url'));
    if (!ok) throw new joseErrors.JWSSignatureVerificationFailed();
    const payload = decodeJsonPart<JWTPayload>(p, 'payload');
    checkClaims(header, payload, { currentDate: new Date(this.clock() * 1000), ...options });
    return { payload, protectedHeader: header } as JWTVerifyResult;
  }
}

const b64json = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

function decodeJsonPart<T>(part: string, what: string): T {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  } catch {
    throw new joseErrors.JWTInvalid(`the JWT ${what} is not valid JSON`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new joseErrors.JWTInvalid(`the JWT ${what} must be an object`);
  return value as T;
}

const normalizeTyp = (t: string) => t.toLowerCase().replace(/^application\//, '');

function checkClaims(header: JWTHeaderParameters, payload: JWTPayload, o: Omit<JWTVerifyOptions, 'algorithms'>): void {
  const fail = (claim: string, reason: string, msg: string) => new joseErrors.JWTClaimValidationFailed(msg, payload, claim, reason);
  if (o.typ && (typeof header.typ !== 'string' || normalizeTyp(header.typ) !== normalizeTyp(o.typ))) {
    throw fail('typ', 'check_failed', 'unexpected "typ" JWT header value');
  }
  for (const claim of o.requiredClaims ?? []) {
    if (!(claim in payload)) throw fail(claim, 'missing', `missing required "${claim}" claim`);
  }
  if (o.issuer !== undefined) {
    const allowed = Array.isArray(o.issuer) ? o.issuer : [o.issuer];
    if (typeof payload.iss !== 'string' || !allowed.includes(payload.iss)) throw fail('iss', 'check_failed', 'unexpected "iss" claim value');
  }
  if (o.subject !== undefined && payload.sub !== o.subject) throw fail('sub', 'check_failed', 'unexpected "sub" claim value');
  if (o.audience !== undefined) {
    const wanted = Array.isArray(o.audience) ? o.audience : [o.audience];
    const aud = typeof payload.aud === 'string' ? [payload.aud] : Array.isArray(payload.aud) ? payload.aud : [];
    if (!aud.some((a) => wanted.includes(a))) throw fail('aud', 'check_failed', 'unexpected "aud" claim value');
  }
  const tolerance = typeof o.clockTolerance === 'number' ? o.clockTolerance : 0;
  const nowSec = Math.floor((o.currentDate ?? new Date()).getTime() / 1000);
  for (const c of ['iat', 'exp', 'nbf'] as const) {
    if (payload[c] !== undefined && typeof payload[c] !== 'number') throw fail(c, 'invalid', `"${c}" claim must be a number`);
  }
  if (payload.nbf !== undefined && payload.nbf > nowSec + tolerance) throw fail('nbf', 'check_failed', '"nbf" claim timestamp check failed');
  if (payload.exp !== undefined && payload.exp <= nowSec - tolerance) {
    throw new joseErrors.JWTExpired('"exp" claim timestamp check failed', payload, 'exp', 'check_failed');
  }
}
