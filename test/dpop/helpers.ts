import { createHash, randomUUID } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';

/** A client's DPoP key, made with jose as a client would. */
export interface DpopKey {
  alg: 'ES256' | 'EdDSA';
  privateKey: CryptoKey;
  publicJwk: JWK;
  jkt: string;
}

export async function dpopKey(alg: 'ES256' | 'EdDSA' = 'ES256'): Promise<DpopKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true, ...(alg === 'EdDSA' ? { crv: 'Ed25519' } : {}) });
  const publicJwk = await exportJWK(publicKey);
  return { alg, privateKey, publicJwk, jkt: await calculateJwkThumbprint(publicJwk, 'sha256') };
}

export const ath = (accessToken: string) => createHash('sha256').update(accessToken).digest('base64url');

export interface ProofClaims {
  htm: string;
  htu: string;
  accessToken?: string;
  nonce?: string;
  iat?: number;
  jti?: string;
  /** header overrides (typ, alg, jwk) for refusals */
  header?: Record<string, unknown>;
}

/** A DPoP proof (RFC 9449 section 4.2) built by hand. */
export async function proof(key: DpopKey, c: ProofClaims): Promise<string> {
  const claims: Record<string, unknown> = {
    htm: c.htm,
    htu: c.htu,
    iat: c.iat ?? Math.floor(Date.now() / 1000),
    jti: c.jti ?? randomUUID(),
    ...(c.accessToken !== undefined ? { ath: ath(c.accessToken) } : {}),
    ...(c.nonce !== undefined ? { nonce: c.nonce } : {}),
  };
  return new SignJWT(claims)
    .setProtectedHeader({ typ: 'dpop+jwt', alg: key.alg, jwk: key.publicJwk, ...c.header } as never)
    .sign(key.privateKey);
}

import { readJson } from '../agents/helpers.js';

export { readJson };

/** client_credentials at the agent token endpoint, with `dpop` as the DPoP header when given. */
export async function agentTokenRequest(
  server: import('../helpers/server.js').TestServer,
  agent: import('../agents/helpers.js').TestAgent,
  dpop?: string,
  fields: Record<string, string> = {},
) {
  const { assertion, JWT_BEARER } = await import('../agents/helpers.js');
  return readJson(
    await fetch(server.ctx.urls.agentToken, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...(dpop !== undefined ? { dpop } : {}) },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: await assertion(server, agent), ...fields }),
    }),
  );
}
