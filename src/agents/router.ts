import { Router, type Request, type Response } from 'express';
import type { AppContext } from '../context.js';
import { showApprovals, postApproval } from './approvals-page.js';
import { backchannelAuthorize } from './ciba.js';
import { agentToken } from './token.js';
import { claimedAgent } from './assertion.js';
import { limitAgentRequest } from './request-limits.js';

type Handler = (ctx: AppContext, req: Request, res: Response) => void | Promise<void>;

/** The agent sign-in endpoints (mounted at the root) and the approvals page; binding and decision are in the edge's route table. */
export function agentsRouter(ctx: AppContext): Router {
  const router = Router();
  const h = (fn: Handler) => (req: Request, res: Response) => fn(ctx, req, res);
  // Sign-ins count against the address and the agent the assertion claims (unverified yet).
  const limited = (fn: Handler) => (req: Request, res: Response) => {
    limitAgentRequest(ctx, req, claimedAgent((req.body as Record<string, unknown> | undefined)?.client_assertion) ?? undefined);
    return fn(ctx, req, res);
  };
  router.post('/apis/regional/v1/ai/auth/token', limited(agentToken));
  router.post('/apis/regional/v1/ai/auth/backchannel-authorize', limited(backchannelAuthorize));
  router.get('/approvals', h(showApprovals));
  router.post('/approvals', h(postApproval));
  return router;
}
