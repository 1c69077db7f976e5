import type { Router } from 'express';
import type { AppContext } from '../context.js';
import type { z } from 'zod';
import type { AuditRecord } from '../store/audit.js';
import type { Store } from '../store/index.js';
import { adminRoute, parseWith } from './route.js';
import { auditPage, auditQuery } from './schemas.js';
import { iso } from '../clock.js';

/**
 * The audit step of a management write: the write runs it in its own transaction, after the
 * change, so the record exists exactly when the change does (a failing record undoes the
 * change). The console passes one naming the person; the management API passes none.
 */
export type Recorder<T = void> = (tx: Store, result: T) => Promise<void>;

export const auditJson = (r: AuditRecord) => ({
  id: r.seq,
  time: iso(r.time),
  kind: r.kind,
  agent_id: r.agent_id,
  user_id: r.user_id,
  action: r.action,
  resource: r.resource,
  context: r.context,
  decision: r.decision,
  reason: r.reason,
  policy_version: r.policy_version,
  actor: r.actor,
  caller: r.caller,
  ...(r.usage != null ? { usage: r.usage } : {}),
  ...(r.chain != null ? { chain: r.chain } : {}),
});

export type AuditQuery = z.output<typeof auditQuery>;

/** One page of the trail, newest first; `next_before` is the `before` of the next page (null on the last). */
export async function listAudit(ctx: AppContext, q: AuditQuery): Promise<{ data: ReturnType<typeof auditJson>[]; next_before: number | null }> {
  // Decisions by default; token issues, approval answers and console changes with `kind=all` or by kind.
  const kind = q.kind === undefined ? 'decision' : q.kind === 'all' ? undefined : q.kind;
  const { reason, ...filter } = q;
  const rows = await ctx.store.audit.list({ ...filter, reason_code: reason, kind, limit: q.limit + 1 });
  const page = rows.slice(0, q.limit);
  return { data: page.map(auditJson), next_before: rows.length > q.limit ? page[page.length - 1]!.seq : null };
}

export function auditRoutes(router: Router, ctx: AppContext): void {
  adminRoute(
    router,
    {
      method: 'get', path: '/audit', tags: ['audit'], summary: 'The audit trail, newest first, a page at a time',
      query: auditQuery,
      responses: { 200: { description: 'a page; pass `next_before` as `before` for the next (null on the last)', schema: auditPage } },
    },
    async (req, res) => void res.json(await listAudit(ctx, parseWith(auditQuery, req.query, 'query'))),
  );
}
