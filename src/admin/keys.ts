import type { Router } from 'express';
import type { AppContext } from '../context.js';
import { SIGNING_ALGS, type SigningAlg } from '../crypto/signing.js';
import type { Recorder } from './audit.js';
import { adminRoute, bodyOrEmpty, parseWith } from './route.js';
import { keysRotate, keysRotated } from './schemas.js';

/** New signing keys for `alg` (both when not given); the old ones stay published for 24 hours. */
export const rotateKeys = (ctx: AppContext, alg?: SigningAlg, record?: Recorder<{ kid: string; alg: SigningAlg }[]>) =>
  ctx.keys.rotate(ctx.store, alg ? [alg] : SIGNING_ALGS, record);

export function keyRoutes(router: Router, ctx: AppContext): void {
  adminRoute(
    router,
    {
      method: 'post', path: '/keys/rotate', tags: ['keys'],
      summary: 'New signing keys; the old ones sign no more and stay in the JWK Set for 24 hours',
      request: keysRotate,
      responses: { 200: { description: 'the new keys', schema: keysRotated } },
    },
    async (req, res) => {
      const { alg } = parseWith(keysRotate, bodyOrEmpty(req));
      res.json({ keys: await rotateKeys(ctx, alg) });
    },
  );
}
