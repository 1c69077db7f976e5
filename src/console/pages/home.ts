import type { Request, Response } from 'express';
import type { AppContext } from '../../context.js';
import { code, escapeHtml as e, type Html } from '../html.js';
import { render } from './common.js';

function card(href: string, title: string, figure: string, line: Html): Html {
  return `<a class="tile" href="${e(href)}"><span class="tile-title">${e(title)}</span><span class="figure">${e(figure)}</span><span class="tile-line">${line}</span></a>`;
}

/** GET /console: where things stand, one tile per area. */
export async function homePage(ctx: AppContext, req: Request, res: Response): Promise<void> {
  const [apps, agents, rules, roles, pending, streams] = await Promise.all([
    ctx.store.applications.list(),
    ctx.store.agents.list(),
    ctx.store.rules.list(),
    ctx.store.roles.list(),
    ctx.store.agentAuth.list({ state: 'pending', limit: 1000 }),
    ctx.store.ssf.listStreams(),
  ]);
  const people = await ctx.store.users.list(1001, 0);
  const policy = await ctx.policy.current();
  const live = rules.filter((r) => r.state === 'live').length;
  const drafts = rules.filter((r) => r.state === 'draft').length;
  const recent = (await ctx.store.audit.list({ kind: 'decision', limit: 200 })).filter((r) => r.decision === 'deny').length;
  const tiles = [
    card('/console/approvals', 'Approvals', String(pending.length), pending.length ? 'waiting for a person' : 'nothing waiting'),
    card('/console/rules', 'Rules', String(live), `live · ${drafts} draft${drafts === 1 ? '' : 's'}`),
    card('/console/agents', 'Agents', String(agents.filter((a) => !a.revoked).length), `active · ${agents.filter((a) => a.revoked).length} revoked`),
    card('/console/audit?decision=deny', 'Denied', String(recent), 'of the last 200 decisions'),
    card('/console/applications', 'Applications', String(apps.length), 'registered'),
    card('/console/people', 'People', people.length > 1000 ? '1000+' : String(people.length), 'with an account'),
    card('/console/roles', 'Roles', String(roles.length), 'defined'),
    card('/console/streams', 'Streams', String(streams.length), 'Shared Signals receivers'),
    card('/console/policy', 'Policy', String(policy.sources.length), `sources · ${code(policy.version)}`),
  ];
  render(ctx, req, res, 200, {
    title: 'Overview',
    section: 'home',
    lead: 'Gatehouse at a glance. Every change made here goes through the management API’s own code and is written to the audit trail with your name.',
    body: `<div class="tiles">${tiles.join('\n')}</div>`,
  });
}
