import type { AppContext } from '../context.js';
import { attributesOf, type AgentState } from '../agents/agent-cache.js';
import type { Attributes, PersonFacts, SubjectFacts } from './policy-interface.js';

/** What a decision knows besides the request itself: who acts, for whom, and what the thing is. */
export interface Facts {
  subject: SubjectFacts;
  person: PersonFacts | null;
  resourceAttributes: Attributes;
}

/** A delegated agent acting for nobody: the person grants nothing (fail closed). */
const NOBODY: PersonFacts = Object.freeze({ id: '', roles: [], groups: [], permissions: [], attributes: {} });

/**
 * The facts of one decision, read fresh (agents through their cache, which follows the
 * `agents` counter; people and entities by primary key), so a change applies to the next one.
 */
export async function loadFacts(ctx: AppContext, agent: AgentState, userId: string | null, resource: string): Promise<Facts> {
  const person = userId !== null ? await personFacts(ctx, userId) : agent.agent.mode === 'delegated' ? NOBODY : null;
  const resourceAttributes = await entityAttributes(ctx, resource);
  // A delegated agent is in the groups of the person it acts for (for `group:<name>` subjects).
  const subject = person && agent.agent.mode === 'delegated' ? { ...agent.subject, groups: person.groups } : agent.subject;
  return { subject, person, resourceAttributes };
}

/** A person as a decision sees them; an unknown id is a person with nothing (fail closed). */
export async function personFacts(ctx: AppContext, userId: string): Promise<PersonFacts> {
  const user = await ctx.store.users.get(userId);
  if (!user) return { id: userId, roles: [], groups: [], permissions: [], attributes: {} };
  return {
    id: user.id,
    email: user.email,
    roles: user.roles,
    groups: user.groups,
    permissions: await ctx.store.roles.permissionsOf(user.roles),
    attributes: attributesOf(user),
  };
}

interface EntityReader {
  get(type: string, id: string): { attributes?: unknown } | undefined | Promise<{ attributes?: unknown } | undefined>;
}

/** The stored entity `<type>:<id>`'s attributes; `{}` when there is none (or no entity store). */
export async function entityAttributes(ctx: AppContext, resource: string): Promise<Attributes> {
  const entities = (ctx.store as { entities?: EntityReader }).entities;
  const i = resource.indexOf(':');
  if (!entities || i <= 0) return {};
  const entity = await entities.get(resource.slice(0, i), resource.slice(i + 1));
  return entity ? attributesOf(entity) : {};
}
