import type { Router } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { PolicyLoadError } from '../policy-service.js';
import { formatDiagnostic, type PolicySet } from '../policy/index.js';
import { adminRoute, bodyOrEmpty, parseWith } from './route.js';
import { z } from 'zod';
import { basename, join } from 'node:path';
import { loadPolicySet, type JsonRule } from '../policy/index.js';
import { toJsonRule } from '../policy-service.js';
import { parseWindow, replay, type ReplayResult } from '../authz/replay.js';
import { entityAttributes, namedSubjectFacts } from '../authz/facts.js';
import { relationshipGraph } from '../authz/relationships.js';
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

  adminRoute(
    router,
    {
      method: 'post', path: '/policy/replay', tags,
      summary: 'Decide the decisions recorded in the audit trail again under a draft, and count what changes',
      request: replayBody,
      responses: {
        200: { description: '`{from, to, decisions, changed, changes: [{before, after, count, examples}], notes}`', schema: replayView },
        400: 'a malformed window, an unknown rule, or a draft with errors',
      },
    },
    async (req, res) => void res.json(await replayDraft(ctx, parseWith(replayBody, bodyOrEmpty(req)))),
  );
}

const replayBody = z.object({
  since: z.string().optional(),
  enable: z.array(z.string()).optional(),
  disable: z.array(z.string()).optional(),
  files: z.record(z.string(), z.string()).optional(),
}).strict();

const replayExample = z.object({ audit_id: z.number(), agent_id: z.string().nullable(), action: z.string().nullable(), resource: z.string().nullable() });
const replayView = z.object({
  from: z.string(), to: z.string(), decisions: z.number(), changed: z.number(),
  changes: z.array(z.object({ before: z.string(), after: z.string(), count: z.number(), examples: z.array(replayExample) })),
  notes: z.array(z.string()),
});

/**
 * The recorded decisions of a window decided again under a draft: the policy directory's files
 * with `files` in place of those of the same names, the live rules with `enable` taken as live and
 * `disable` as disabled, and `candidate` (an unsaved rule, such as the console's form) taken as
 * live in place of the stored rule of its id, or beside the others when no rule has that id.
 * Bad input is a 400 naming the field.
 */
export async function replayDraft(ctx: AppContext, body: z.output<typeof replayBody>, candidate?: JsonRule & { id: string }): Promise<ReplayResult> {
  const window = parseWindow(body.since ?? '7d');
  if (window === null) throw errors.invalidRequest('since: a window such as 7d, 24h, 30m or 90s', { field: 'since' });
  // The draft: the policy directory's files with those given in their place, the live rules
  // with `enable` taken as live and `disable` as disabled.
  const inForce = await ctx.policy.files();
  let files = inForce;
  if (body.files) {
    const given = Object.entries(body.files).map(([name, text]) => {
      if (!/^[\w.-]{1,200}\.policy$/.test(name) || basename(name) !== name) throw errors.invalidRequest(`files: "${name}" is not a .policy file name`, { field: 'files' });
      return { path: join(ctx.config.policyDir, name), text };
    });
    const names = new Set(given.map((g) => basename(g.path)));
    files = [...inForce.filter((f) => !names.has(basename(f.path))), ...given];
  }
  const all = await ctx.store.rules.list();
  const byId = new Map(all.map((r) => [r.id, r]));
  for (const id of [...(body.enable ?? []), ...(body.disable ?? [])]) if (!byId.has(id)) throw errors.invalidRequest(`no rule ${id}`, { field: 'enable' });
  const disable = new Set(body.disable ?? []);
  const rules: JsonRule[] = all
    .filter((r) => (r.state === 'live' || body.enable?.includes(r.id)) && !disable.has(r.id) && r.id !== candidate?.id)
    .map(toJsonRule);
  if (candidate) rules.push(candidate);
  const { policySet, diagnostics } = loadPolicySet({ files, rules });
  if (!policySet) throw errors.invalidRequest(`the draft has ${diagnostics.filter((d) => d.severity !== 'warning').length} error(s)`, { errors: diagnostics.filter((d) => d.severity !== 'warning').map(formatDiagnostic) });
  const until = Math.floor(ctx.clock.now() / 1000);
  return replay(ctx.store, policySet, {
    since: until - window, until,
    relationships: await relationshipGraph(ctx).current(),
    current: async (r) => {
      const who = r.agent_id !== null ? { type: 'agent', id: r.agent_id } : r.user_id !== null ? { type: 'user', id: r.user_id } : null;
      const named = who ? await namedSubjectFacts(ctx, who.type, who.id) : null;
      if (!named) return null;
      return { ...named, resourceAttributes: r.resource ? await entityAttributes(ctx, r.resource) : {} };
    },
  });
}
