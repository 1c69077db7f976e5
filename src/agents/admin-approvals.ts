import { Router } from 'express';
import { z } from 'zod';
import { adminRoute, param, parseWith } from '../admin/route.js';
import type { AppContext } from '../context.js';
import { answerApproval, approvalView, type Answer } from './approvals.js';

const approvalSchema = z.object({
  id: z.string(),
  kind: z.enum(['ciba', 'action']),
  state: z.enum(['pending', 'approved', 'denied', 'consumed', 'expired']),
  agent_id: z.string(),
  user_id: z.string().nullable(),
  binding_message: z.string().nullable(),
  auth_req_id: z.string().nullable(),
  scope: z.array(z.string()),
  action: z.string().nullable(),
  resource: z.string().nullable(),
  context: z.record(z.string(), z.unknown()).nullable(),
  authorization_details: z.array(z.record(z.string(), z.unknown())).nullable().meta({ description: 'CIBA: the authorization details (RFC 9396) asked for' }),
  created_at: z.string(),
  expires_at: z.string(),
  decided_at: z.string().nullable(),
});
const approvalList = z.object({ data: z.array(approvalSchema) });
const listQuery = z.object({
  state: z.enum(['pending', 'approved', 'denied', 'consumed', 'expired']).optional(),
  user_id: z.string().optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

/** The administrator's side of approvals: CIBA requests and approval_required actions. Mounted at /admin/v1/approvals behind requireAdmin. */
export function adminApprovalsRouter(ctx: AppContext): Router {
  const router = Router();
  router.use((_req, res, next) => {
    res.setHeader('Cache-Control', 'no-store');
    next();
  });
  adminRoute(
    router,
    {
      method: 'get',
      path: '/approvals',
      expressPath: '/',
      summary: 'CIBA requests and approval_required actions (newest first)',
      tags: ['approvals'],
      query: listQuery,
      responses: { 200: { description: 'the approvals', schema: approvalList } },
    },
    async (req, res) => {
      const q = parseWith(listQuery, req.query, 'query');
      const data = (await ctx.store.agentAuth.list(q)).map((a) => approvalView(ctx, a));
      res.json({ data });
    },
  );
  for (const answer of ['approve', 'deny'] as Answer[]) {
    adminRoute(
      router,
      {
        method: 'post',
        path: `/approvals/{id}/${answer}`,
        expressPath: `/:id/${answer}`,
        summary: answer === 'approve' ? 'Approve a pending request' : 'Deny a pending request',
        tags: ['approvals'],
        responses: {
          200: { description: 'the request, answered', schema: approvalList },
          404: 'no such approval',
          409: 'the request is not pending (already answered or expired)',
        },
      },
      async (req, res) => {
        const approval = await answerApproval(ctx, param(req, 'id'), answer, { admin: true });
        res.json({ data: [approvalView(ctx, approval)] });
      },
    );
  }
  return router;
}
