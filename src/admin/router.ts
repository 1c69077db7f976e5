import { Router } from 'express';
import type { AppContext } from '../context.js';
import { requireAdmin } from './auth.js';

export function adminRouter(ctx: AppContext): Router {
  const router = Router();
  router.use(requireAdmin(ctx));
  return router;
}
