// What the policy knows about an AuthZEN subject and resource, from the store: a subject of
// type `user` is a stored person (by id), `agent` a stored agent (by agent ID); a resource's
// attributes are its stored entity's plus the request's `properties`.

import type { AppContext } from '../context.js';
import { agentCache } from '../agents/agent-cache.js';
import type { Properties, Subject } from './request.js';

export type Attributes = Record<string, unknown>;

/** The acting subject as the decision core sees it. */
export interface SubjectFacts {
  type: 'agent' | 'user';
  id: string;
  name?: string;
  mode?: 'delegated' | 'autonomous';
  email?: string;
  roles: string[];
  groups: string[];
  permissions: string[];
  attributes: Attributes;
  capabilities?: { name: string; limits?: Record<string, unknown> | null }[];
}

export interface PersonFacts {
  id: string;
  email?: string;
  roles: string[];
  groups: string[];
  permissions: string[];
  attributes: Attributes;
}

export type ResolvedSubject =
  | { found: true; subject: SubjectFacts; person: PersonFacts | null }
  | { found: false; why: string };

/**
 * Stored attributes and request properties as one object: the stored value wins a name clash
 * (the PDP's own record is the reference; properties fill in what it does not hold).
 */
export function mergeAttributes(stored: Attributes | undefined, properties: Properties | undefined): Attributes {
  if (!properties) return stored ?? {};
  if (!stored) return properties;
  return { ...properties, ...stored };
}

/** Lookups shared by the evaluations of one request (a batch asks about the same subject often). */
export class FactsMemo {
  private subjects = new Map<string, Promise<ResolvedSubject>>();
  private entities = new Map<string, Promise<Attributes | undefined>>();
  private permissions = new Map<string, Promise<string[]>>();

  constructor(private readonly ctx: AppContext) {}

  subject(s: Subject): Promise<ResolvedSubject> {
    // Properties are per evaluation; the stored part is looked up once.
    const key = `${s.type}\u0000${s.id}`;
    let p = this.subjects.get(key);
    if (!p) this.subjects.set(key, (p = resolveStored(this.ctx, s.type, s.id, this)));
    return p.then((r) => (r.found && s.properties ? withProperties(r, s.properties) : r));
  }

  entity(type: string, id: string): Promise<Attributes | undefined> {
    const key = `${type}\u0000${id}`;
    let p = this.entities.get(key);
    if (!p) this.entities.set(key, (p = storedEntity(this.ctx, type, id)));
    return p;
  }

  permissionsOf(roles: string[]): Promise<string[]> {
    const key = roles.join('\u0000');
    let p = this.permissions.get(key);
    if (!p) this.permissions.set(key, (p = Promise.resolve(this.ctx.store.roles.permissionsOf(roles))));
    return p;
  }
}

function withProperties(r: Extract<ResolvedSubject, { found: true }>, properties: Properties): ResolvedSubject {
  const subject = { ...r.subject, attributes: mergeAttributes(r.subject.attributes, properties) };
  // A user subject is its own person: both read the same attributes.
  const person = r.person && r.subject.type === 'user' ? { ...r.person, attributes: subject.attributes } : r.person;
  return { found: true, subject, person };
}

async function resolveStored(ctx: AppContext, type: string, id: string, memo: FactsMemo): Promise<ResolvedSubject> {
  if (type === 'user') {
    const user = await ctx.store.users.get(id);
    if (!user) return { found: false, why: `unknown subject user ${id}` };
    const permissions = await memo.permissionsOf(user.roles);
    const attributes = user.attributes;
    const facts = { id: user.id, email: user.email, roles: user.roles, groups: user.groups, permissions, attributes };
    return { found: true, subject: { type: 'user', name: user.name, ...facts }, person: facts };
  }
  if (type === 'agent') {
    const state = await agentCache(ctx).active(id);
    if (!state) return { found: false, why: `unknown or revoked subject agent ${id}` };
    const { agent } = state;
    return {
      found: true,
      subject: {
        type: 'agent',
        id: agent.agent_id,
        name: agent.name,
        mode: agent.mode,
        roles: agent.roles,
        groups: [],
        permissions: state.permissions,
        attributes: agent.attributes,
        capabilities: agent.capabilities.map((c) => ({ name: c.name, limits: c.limits })),
      },
      // A delegated agent asked about through AuthZEN acts for nobody: the person grants nothing.
      person: agent.mode === 'delegated' ? { id: '', roles: [], groups: [], permissions: [], attributes: {} } : null,
    };
  }
  return { found: false, why: `unknown subject type ${type}` };
}

/** The stored entity's attributes, or undefined when there is none. */
async function storedEntity(ctx: AppContext, type: string, id: string): Promise<Attributes | undefined> {
  return (await ctx.store.entities.get(type, id))?.attributes;
}
