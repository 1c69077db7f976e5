import type { AppContext } from '../context.js';
import type { Person } from './session.js';

/**
 * Writes one record of a change made in the console, naming the person (`actor`, their user
 * id) beside the action (`console.<area>.<verb>`), its target and the details that matter.
 * Secrets never go in: the details are chosen by each caller.
 */
export async function recordChange(
  ctx: AppContext,
  person: Person,
  action: string,
  target: string | null,
  details: Record<string, unknown> = {},
  about: { agent_id?: string; user_id?: string } = {},
): Promise<void> {
  await ctx.store.audit.append({
    kind: 'admin',
    actor: person.user.id,
    action: `console.${action}`,
    resource: target,
    context: details,
    agent_id: about.agent_id ?? null,
    user_id: about.user_id ?? null,
  });
}
