import { Router, type Request, type Response } from 'express';
import type { AppContext } from '../context.js';
import { showApprovals, postApproval } from '../pages/approvals.js';
import { authorizeAction } from './authorize.js';
import { backchannelAuthorize } from './ciba.js';
import { agentToken } from './token.js';
import { transactionToken } from './transaction-token.js';

type Handler = (ctx: AppContext, req: Request, res: Response) => void | Promise<void>;

/** The agent endpoints (mounted at the root) and the approvals page. */
export function agentsRouter(ctx: AppContext): Router {
  const router = Router();
  const h = (fn: Handler) => (req: Request, res: Response) => fn(ctx, req, res);
  router.post('/apis/regional/v1/ai/auth/token', h(agentToken));
  router.post('/apis/regional/v1/ai/auth/backchannel-authorize', h(backchannelAuthorize));
  router.post('/apis/regional/v1/ai/auth/transaction-token', h(transactionToken));
  router.post('/apis/regional/v1/agents/authorize', h(authorizeAction));
  router.get('/approvals', h(showApprovals));
  router.post('/approvals', h(postApproval));
  return router;
}
