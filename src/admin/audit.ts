import type { Router } from 'express';
import type { AppContext } from '../context.js';
import type { AuditRecord } from '../store/audit.js';
import { adminRoute, iso, parseWith } from './route.js';
import { auditPage, auditQuery } from './schemas.js';

const auditJson = (r: AuditRecord) => ({
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
});

export function auditRoutes(router: Router, ctx: AppContext): void {
  adminRoute(
    router,
    {
      method: 'get', path: '/audit', tags: ['audit'], summary: 'The audit trail, newest first, a page at a time',
      query: auditQuery,
      responses: { 200: { description: 'a page; pass `next_before` as `before` for the next (null on the last)', schema: auditPage } },
    },
    async (req, res) => {
      const q = parseWith(auditQuery, req.query, 'query');
      // CONTRACT 3 lists decisions; token issues and approval answers are there with `kind=all` or by kind.
      const kind = q.kind === undefined ? 'decision' : q.kind === 'all' ? undefined : q.kind;
      const rows = await ctx.store.audit.list({ ...q, kind, limit: q.limit + 1 });
      const page = rows.slice(0, q.limit);
      res.json({ data: page.map(auditJson), next_before: rows.length > q.limit ? page[page.length - 1]!.seq : null });
    },
  );
}
