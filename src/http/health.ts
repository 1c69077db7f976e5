import type { Express } from 'express';
import type { AppContext } from '../context.js';
import type { PolicyStatus } from '../policy-service.js';

export interface Health {
  /** ok; degraded (serving, on a stale policy); unavailable (answers 503) */
  status: 'ok' | 'degraded' | 'unavailable';
  database: 'ok' | 'unavailable';
  policy: PolicyStatus;
  policy_version: string | null;
}

/** The database (one primary-key read) and the policy in force. */
export async function health(ctx: AppContext): Promise<Health> {
  let database: Health['database'] = 'ok';
  try {
    await ctx.store.settings.get('admin_token_hash');
  } catch {
    database = 'unavailable';
  }
  const policy = await ctx.policy.state();
  const status = database !== 'ok' || policy.status === 'unavailable' ? 'unavailable' : policy.status === 'stale' ? 'degraded' : 'ok';
  return { status, database, policy: policy.status, policy_version: policy.set?.version ?? null };
}

/**
 * GET /healthz: 200 `{"status":"ok"}` when the database answers and the policy in force is the
 * stored one; otherwise the body names what is wrong: 200 `degraded` on a stale policy (still
 * deciding, with the last policy that compiled), 503 `unavailable` when the database cannot be
 * read or no policy is in force (every decision would be a deny).
 * GET /metrics: the Prometheus exposition format.
 */
export function mountOperations(ctx: AppContext, app: Express): void {
  app.get('/healthz', async (_req, res) => {
    const h = await health(ctx);
    res.setHeader('Cache-Control', 'no-store');
    res.status(h.status === 'unavailable' ? 503 : 200).json(h.status === 'ok' ? { status: 'ok' } : h);
  });
  app.get('/metrics', async (_req, res) => {
    const text = await ctx.metrics.text();
    res.setHeader('Cache-Control', 'no-store');
    res.type(ctx.metrics.registry.contentType).send(text);
  });
}
