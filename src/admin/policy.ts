import type { Router } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { PolicyLoadError } from '../policy-service.js';
import { formatDiagnostic, type PolicySet } from '../policy/index.js';
import { adminRoute } from './route.js';
import { policyReloadError, policyView } from './schemas.js';

const policyJson = (p: PolicySet) => ({ version: p.version, sources: p.sources });

export function policyRoutes(router: Router, ctx: AppContext): void {
  const tags = ['policy'];

  adminRoute(
    router,
    {
      method: 'get', path: '/policy', tags, summary: 'The policy version in force and its sources (files and live rules)',
      responses: { 200: { description: 'the policy in force', schema: policyView } },
    },
    async (_req, res) => void res.json(policyJson(await ctx.policy.current())),
  );

  adminRoute(
    router,
    {
      method: 'post', path: '/policy/reload', tags, summary: 'Load the policy files again; nothing changes when they have errors',
      responses: {
        200: { description: 'the policy now in force', schema: policyView },
        400: { description: 'the files have errors, each as `file:line:col: message`', schema: policyReloadError },
      },
    },
    async (_req, res) => {
      try {
        res.json(policyJson(await ctx.policy.reloadFromDisk()));
      } catch (err) {
        if (!(err instanceof PolicyLoadError)) throw err;
        const list = err.diagnostics.map(formatDiagnostic);
        throw errors.invalidRequest(`the policy files have ${list.length} error(s); the policy in force is unchanged`, { errors: list });
      }
    },
  );
}
