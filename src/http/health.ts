import { constantTimeEqual, sha256 } from '../crypto/hash.js';
import { errors } from '../errors.js';
import { bearerToken } from '../oauth/bearer.js';
import type { Express } from 'express';
import type { AppContext } from '../context.js';
import type { PolicyStatus } from '../policy-service.js';

/** Whether this request may read the metrics: open by configuration, or a bearer of one of the two tokens (compared by hash in constant time). */
function metricsAllowed(ctx: AppContext, authorization: string | undefined): boolean {
  if (ctx.config.metricsOpen) return true;
  const token = bearerToken(authorization);
  if (token === undefined) return false;
  const hash = sha256(token);
  const metrics = ctx.config.metricsToken !== undefined && constantTimeEqual(hash, sha256(ctx.config.metricsToken));
  return constantTimeEqual(hash, ctx.adminTokenHash) || metrics;
}

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

const draining = new WeakSet<AppContext>();
/** From now on this server's /healthz answers 503 `draining` (it has been asked to stop). */
export function markDraining(ctx: AppContext): void {
  draining.add(ctx);
}

/**
 * GET /healthz: 503 `{"status":"draining"}` once the server has been asked to stop; else 200 `{"status":"ok"}` when the database answers and the policy in force is the
 * stored one; otherwise the body names what is wrong: 200 `degraded` on a stale policy (still
 * deciding, with the last policy that compiled), 503 `unavailable` when the database cannot be
 * read or no policy is in force (every decision would be a deny).
 * GET /metrics: the Prometheus exposition format, for a bearer of GATEHOUSE_METRICS_TOKEN or the
 * management API's token, or for anyone with GATEHOUSE_METRICS_OPEN=true.
 */
export function mountOperations(ctx: AppContext, app: Express): void {
  app.get('/healthz', async (_req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    if (draining.has(ctx)) return void res.status(503).json({ status: 'draining' });
    const h = await health(ctx);
    res.status(h.status === 'unavailable' ? 503 : 200).json(h.status === 'ok' ? { status: 'ok' } : h);
  });
  app.get('/metrics', async (req, res) => {
    if (!metricsAllowed(ctx, req.get('authorization'))) {
      throw errors.invalidToken('GET /metrics takes the metrics token (or the management API token) as a bearer token', {}, { 'WWW-Authenticate': 'Bearer' });
    }
    const text = await ctx.metrics.text();
    res.setHeader('Cache-Control', 'no-store');
    res.type(ctx.metrics.registry.contentType).send(text);
  });
}
