import type { AppContext } from '../context.js';
import { ENTITIES_DOMAIN } from '../store/entities.js';
import { agentKnown, type AgentState } from './agent-cache.js';
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
  return personOf(ctx, user);
}

/** A stored person's facts: their roles' permissions read with them. */
async function personOf(ctx: AppContext, user: StoredPerson): Promise<PersonFacts> {
  return {
    id: user.id,
    email: user.email,
    roles: user.roles,
    groups: user.groups,
    permissions: await ctx.store.roles.permissionsOf(user.roles),
    attributes: user.attributes,
  };
}

type StoredPerson = NonNullable<Awaited<ReturnType<AppContext['store']['users']['get']>>>;

/**
 * The stored entities' attributes, cached per process and dropped whenever the `entities`
 * change stamp moves (every write moves it), so a change applies to the next decision and a
 * decision on a known resource costs no read.
 */
class EntityCache {
  private version = -1;
  private byKey = new Map<string, Attributes | null>();

  constructor(private readonly ctx: AppContext) {}

  /** The stored entity's attributes, or null when there is none. */
  async attributes(type: string, id: string): Promise<Attributes | null> {
    const v = await this.ctx.store.changes.version(ENTITIES_DOMAIN);
    if (v !== this.version) {
      this.byKey.clear();
      this.version = v;
    }
    const key = `${type}:${id}`;
    let attributes = this.byKey.get(key);
    if (attributes === undefined) {
      const entity = await this.ctx.store.entities.get(type, id);
      attributes = entity ? entity.attributes : null;
      // Bounded: a flood of distinct resources must not grow memory without limit.
      if (this.byKey.size >= 10_000) this.byKey.clear();
      this.byKey.set(key, attributes);
    }
    return attributes;
  }
}

const EMPTY: Attributes = Object.freeze({});
const entityCaches = new WeakMap<AppContext, EntityCache>();

/** The stored entity `<type>:<id>`'s attributes; `{}` when there is none. */
export async function entityAttributes(ctx: AppContext, resource: string): Promise<Attributes> {
  return (await storedEntity(ctx, resource)) ?? EMPTY;
}

/** The stored entity `<type>:<id>`'s attributes, or null when there is none. */
export function storedEntity(ctx: AppContext, key: string): Promise<Attributes | null> | null {
  const i = key.indexOf(':');
  if (i <= 0) return null;
  let cache = entityCaches.get(ctx);
  if (!cache) entityCaches.set(ctx, (cache = new EntityCache(ctx)));
  return cache.attributes(key.slice(0, i), key.slice(i + 1));
}

/**
 * A subject named by type and id (an AuthZEN subject):
 * - `user` is the stored person of that id, its own person; a person not stored is still a
 *   subject when the policy's relation model declares the type `user` (it then holds what the
 *   relationships give `user:<id>`, and no roles); `user:*` is everyone, never a stored person;
 * - `agent` the stored agent (a delegated one acting for nobody, so its person grants nothing);
 * - any other type the relation model declares is an entity: its stored entity's attributes
 *   (`PUT /admin/v1/entities/<type>/<id>`, or the project file's `entities`), its roles the
 *   attribute `roles` names (a list of role names), and no person.
 * Null when there is no such subject: an agent not stored or revoked, a type neither built in
 * nor declared.
 */
export async function namedSubjectFacts(ctx: AppContext, type: string, id: string): Promise<Omit<Facts, 'resourceAttributes'> | null> {
  if (type === 'agent') {
    const state = await agentKnown(ctx, id);
    if (!state) return null;
    return { subject: state.subject, person: state.agent.mode === 'delegated' ? NOBODY : null };
  }
  if (type === 'user' && id !== '*') {
    const user = await ctx.store.users.get(id);
    if (user) {
      const person = await personOf(ctx, user);
      return { subject: { type: 'user', name: user.name, ...person }, person };
    }
  }
  const model = (await ctx.policy.state()).set?.compiled.relations;
  if (!model?.types.has(type)) return null;
  const attributes = await entityAttributes(ctx, `${type}:${id}`);
  if (type === 'user') {
    const person: PersonFacts = { id, roles: [], groups: [], permissions: [], attributes };
    return { subject: { type: 'user', ...person }, person };
  }
  const roles = Array.isArray(attributes.roles) ? attributes.roles.filter((r): r is string => typeof r === 'string') : [];
  const permissions = roles.length ? await ctx.store.roles.permissionsOf(roles) : [];
  return { subject: { type, id, roles, groups: [], permissions, attributes }, person: null };
}

/**
 * A named subject with the attributes its request adds (the stored value wins a clash). A
 * person asked about directly is their own person: subject and person read the same attributes.
 */
export function withSubjectProperties<F extends { subject: SubjectFacts; person: PersonFacts | null }>(named: F, properties: Attributes | undefined): F {
  if (!properties) return named;
  const subject = { ...named.subject, attributes: withProperties(named.subject.attributes, properties) };
  const person = named.person && subject.type === 'user' ? { ...named.person, attributes: subject.attributes } : named.person;
  return { ...named, subject, person };
}

/** Stored attributes with request-supplied ones filling the gaps (the stored value wins a clash). */
export function withProperties(stored: Attributes, properties: Attributes | undefined): Attributes {
  return properties ? { ...properties, ...stored } : stored;
}
