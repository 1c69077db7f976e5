import { createPrivateKey, createPublicKey, generateKeyPair, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import { calculateJwkThumbprint, exportJWK, jwtVerify, SignJWT, type JWK, type JWTPayload, type JWTVerifyOptions, type JWTVerifyResult } from 'jose';
import type { SecretBox } from './secret-box.js';
import type { KeysStore, SigningKeyRow } from '../store/keys.js';
import type { SettingsStore } from '../store/settings.js';

export type SigningAlg = 'RS256' | 'EdDSA';
export const SIGNING_ALGS: SigningAlg[] = ['RS256', 'EdDSA'];

/** A rotated key stays in the JWK Set this long (the description: 24 hours). */
export const RETIRED_KEY_PUBLISHED_SECONDS = 24 * 60 * 60;

const genKeyPair = promisify(generateKeyPair);

interface ActiveKey { kid: string; alg: SigningAlg; privateKey: KeyObject }

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
    private readonly clock: () => number = () => Math.floor(Date.now() / 1000),
  ) {}

  /** Makes one key per algorithm when none is active (first start). */
  async ensureKeys(): Promise<void> {
    const have = new Set(this.keys.active().map((k) => k.alg));
    for (const alg of SIGNING_ALGS) if (!have.has(alg)) await this.createKey(alg);
  }

  /** New keys for the named algorithms; the previous ones sign no more but stay published for 24 hours. */
  async rotate(algs: SigningAlg[] = SIGNING_ALGS): Promise<{ kid: string; alg: SigningAlg }[]> {
    const out: { kid: string; alg: SigningAlg }[] = [];
    for (const alg of algs) out.push(await this.createKey(alg));
    return out;
  }

  private async createKey(alg: SigningAlg): Promise<{ kid: string; alg: SigningAlg }> {
    const { privateKey, publicKey } =
      alg === 'RS256'
        ? await genKeyPair('rsa', { modulusLength: 2048 })
        : await genKeyPair('ed25519');
    const jwk = await exportJWK(publicKey);
    const kid = await calculateJwkThumbprint(jwk, 'sha256');
    const publicJwk = { ...jwk, kid, alg, use: 'sig' };
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    this.keys.add({ kid, alg, public_jwk: JSON.stringify(publicJwk), private_enc: this.box.seal(pem), created_at: this.clock() });
    this.settings.bump('keys');
    return { kid, alg };
  }

  private refresh(): void {
    const version = this.settings.version('keys');
    if (version === this.loadedVersion) return;
    const active = new Map<SigningAlg, ActiveKey>();
    for (const row of this.keys.active()) {
      if (active.has(row.alg)) continue; // newest first
      active.set(row.alg, { kid: row.kid, alg: row.alg, privateKey: createPrivateKey(this.box.open(row.private_enc)) });
    }
    this.active = active;
    this.publicByKid.clear();
    this.jwksCache = undefined;
    this.loadedVersion = version;
  }

  private published(): SigningKeyRow[] {
    return this.keys.published(this.clock(), RETIRED_KEY_PUBLISHED_SECONDS);
  }

  /** The JWK Set: public members only, active keys and those retired less than 24 hours ago. */
  jwks(): { keys: JWK[] } {
    this.refresh();
    const t = this.clock();
    if (!this.jwksCache || t - this.jwksCache.at >= 60) {
      this.jwksCache = { at: t, keys: this.published().map((r) => JSON.parse(r.public_jwk) as JWK) };
    }
    return { keys: this.jwksCache.keys };
  }

  activeKid(alg: SigningAlg): string {
    this.refresh();
    const k = this.active.get(alg);
    if (!k) throw new Error(`no active ${alg} signing key`);
    return k.kid;
  }

  /** Signs claims as a JWT with the active key of `alg`; `typ` goes into the header. */
  async sign(alg: SigningAlg, claims: JWTPayload, typ?: string): Promise<string> {
    this.refresh();
    const k = this.active.get(alg);
    if (!k) throw new Error(`no active ${alg} signing key`);
    return new SignJWT(claims).setProtectedHeader({ alg, kid: k.kid, ...(typ ? { typ } : {}) }).sign(k.privateKey);
  }

  private publicKey(kid: string): { alg: SigningAlg; key: KeyObject } | undefined {
    let k = this.publicByKid.get(kid);
    if (k) return k;
    const row = this.published().find((r) => r.kid === kid);
    if (!row) return undefined;
    k = { alg: row.alg, key: createPublicKey({ key: JSON.parse(row.public_jwk), format: 'jwk' }) };
    this.publicByKid.set(kid, k);
    return k;
  }

  /**
   * Verifies a JWT this service signed. Only `alg` is accepted (no `none`, no confusion
   * between algorithms), and the key is chosen by `kid` among the published keys of that alg.
   */
  async verify(token: string, alg: SigningAlg, options: Omit<JWTVerifyOptions, 'algorithms'> = {}): Promise<JWTVerifyResult> {
    this.refresh();
    return jwtVerify(
      token,
      (header) => {
        const k = header.kid ? this.publicKey(header.kid) : undefined;
        if (!k || k.alg !== alg || header.alg !== alg) throw new Error('unknown signing key');
        return k.key;
      },
      { ...options, algorithms: [alg] },
    );
  }
}
