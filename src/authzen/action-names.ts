// The concrete action names Gatehouse knows, for action search. A wildcard (`*:documents`,
// `*:*`, a rule on `*:documents`) grants every action on a kind, and an action search cannot
// list "every action": it lists the names that occur somewhere, each then decided like any
// other candidate. A name occurs in the policy's rules and limits blocks, in the stored roles'
// permissions and in the stored agents' capabilities, whatever kind it is named with (an
// action named for invoices is still a name a PEP may ask about for documents).

import type { AppContext } from '../context.js';
import type { PolicySet } from '../authz/policy-interface.js';
import { actionOfRelation } from './names.js';

/** The verb of a permission key or relation, unless it is the wildcard or the key is malformed. */
function verbOf(key: string): string | undefined {
  const i = key.indexOf(':');
  if (i <= 0) return undefined;
  const verb = actionOfRelation(key);
  return verb === '*' ? undefined : verb;
}

/** Every concrete action name of the policy in force and the store (unsorted, unique). */
export async function knownActionNames(ctx: AppContext, policy: PolicySet): Promise<Set<string>> {
  const names = new Set(await storedActionNames(ctx));
  for (const relation of policy.compiled.index.keys()) addVerb(names, relation);
  for (const capability of policy.compiled.limits.keys()) addVerb(names, capability);
  return names;
}

function addVerb(names: Set<string>, key: string): void {
  const verb = verbOf(key);
  if (verb !== undefined) names.add(verb);
}

/**
 * The names in the stored roles and agents' capabilities, read again only when the `agents`
 * change counter has moved (every role, agent and capability change moves it), so a search
 * does not read every agent each time.
 */
const stored = new WeakMap<AppContext, { version: number; names: Promise<string[]> }>();
async function storedActionNames(ctx: AppContext): Promise<string[]> {
  const version = await ctx.store.changes.version('agents');
  const hit = stored.get(ctx);
  if (hit && hit.version === version) return hit.names;
  const names = (async () => {
    const out = new Set<string>();
    const [roles, agents] = await Promise.all([ctx.store.roles.list(), ctx.store.agents.list()]);
    for (const role of roles) for (const p of role.permissions) addVerb(out, p);
    for (const agent of agents) for (const c of agent.capabilities) addVerb(out, c.name);
    return [...out];
  })();
  stored.set(ctx, { version, names });
  // A failed read is not remembered: the next search reads again.
  names.catch(() => stored.get(ctx)?.names === names && stored.delete(ctx));
  return names;
}
