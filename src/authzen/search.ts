// The Search APIs: which subjects, resources or actions the policy allows for the rest of the
// request. Candidates come from the relationships by reverse expansion when the action is a
// relation of the resource's type, and from the stored people, agents and entities when the
// compiled policy says a role permission or a rule (indexed under the relation and the
// object's kind) could grant it at all; the candidates are then decided in order, without
// recording anything or touching approvals and counters (a search asks, it does not act),
// until the page is full or the per-request bound on candidates examined is reached.

import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { permissionCovers } from '../policy/index.js';
import type { PolicySet } from '../authz/policy-interface.js';
import type { Caller } from './caller.js';
import { decideDry, type Question } from './decide.js';
import { FactsMemo, type SubjectFacts } from './facts.js';
import { actionOfRelation, objectOf, pluralOf, relationOf } from './names.js';
import { collectPage, sortedIds, type Paged } from './paging.js';
import { readSearchRequest, type SearchKind, type SearchRequest, type Subject } from './request.js';
import { grantingRules, relationsForKind, wildcardActionGrants } from './policy-index.js';
import { knownActionNames } from './action-names.js';
import { declaresType, mergeSorted, modelRelation, objectsHolding, subjectsHolding } from './relation-candidates.js';

type Entity = { type: string; id: string };

/** POST /access/v1/search/{subject|resource|action} */
export async function searchAnswer(ctx: AppContext, caller: Caller, kind: SearchKind, body: unknown): Promise<Paged<unknown>> {
  const req = readSearchRequest(kind, body);
  withinGrant(caller, req);
  // No policy in force: nothing can be shown to be allowed.
  const policy = (await ctx.policy.state()).set;
  if (!policy) return { results: [] };
  const memo = new FactsMemo(ctx);
  switch (kind) {
    case 'subject':
      return searchSubjects(ctx, policy, memo, req);
    case 'resource':
      return searchResources(ctx, policy, memo, req);
    case 'action':
      return searchActions(ctx, policy, memo, req);
  }
}

/**
 * A search names only the subject and resource types the caller's grant lists (when it lists
 * them): a 403 naming the field otherwise. Searches never act (they decide dry), so this bounds
 * what a caller may learn, not what it may spend.
 */
function withinGrant(caller: Caller, req: SearchRequest): void {
  const { search_subject_types: subjects, search_resource_types: resources } = caller.terms;
  if (subjects && !subjects.includes(req.subject.type)) {
    throw errors.forbidden(`subject.type: this application's grant does not let its searches name subjects of type ${req.subject.type}`);
  }
  if (resources && !resources.includes(req.resource.type)) {
    throw errors.forbidden(`resource.type: this application's grant does not let its searches name resources of type ${req.resource.type}`);
  }
}

const context = (req: SearchRequest): Record<string, unknown> =>
  req.action?.properties ? { ...req.action.properties, ...req.context } : req.context;

const allows = async (ctx: AppContext, policy: PolicySet, memo: FactsMemo, q: Question): Promise<boolean> =>
  (await decideDry(ctx, policy, memo, q)) === 'allow';

/** Could this subject be granted `relation` on objects of `kind` at all (a role permission, or a rule naming it)? */
function mayBeGranted(policy: PolicySet, subject: SubjectFacts, relation: string, kind: string): boolean {
  if (subject.capabilities && !subject.capabilities.some((c) => c.name === relation)) return false;
  const probe = `${kind}:\u0000`;
  if (subject.permissions.some((p) => permissionCovers(p, relation, probe, policy.compiled.singulars))) return true;
  return grantingRules(policy, relation, kind).some((r) => r.matchesSubject(subject));
}

/**
 * Subject search. Candidates: when the action is a relation of the resource's type, the
 * subjects the relationships give it to (`*` when a wildcard does); also the stored people,
 * agents or entities of the type that a role or rule could grant it. Each is then decided (dry), so a deny
 * rule or a limit leaves it out, as it would deny the evaluation.
 */
async function searchSubjects(ctx: AppContext, policy: PolicySet, memo: FactsMemo, req: SearchRequest): Promise<Paged<unknown>> {
  const type = req.subject.type;
  const { resource } = req;
  const relation = relationOf(req.action!.name, resource.type, policy.compiled.singulars);
  const object = objectOf(resource.type, resource.id!);
  const related = modelRelation(policy, resource.type, req.action!.name);
  const fromRelationships = related && declaresType(policy, type) ? await subjectsHolding(ctx, policy, { type: resource.type, id: resource.id! }, related, type, context(req)) : [];
  let stored: string[] = [];
  if (type === 'user') stored = sortedIds((await ctx.store.users.list(1_000_000, 0)).map((u) => u.id));
  else if (type === 'agent') stored = sortedIds((await ctx.store.agents.list()).filter((a) => !a.revoked).map((a) => a.agent_id));
  // Entities of a declared type hold roles too (their stored `roles`): those are candidates for what a role or rule grants.
  else if (declaresType(policy, type)) stored = sortedIds(await storedEntityIds(ctx, type));
  const granted = new Set(fromRelationships);
  const ids = mergeSorted(fromRelationships, stored);
  return collectPage('subject', req, ids, async (id) => {
    const subject = { type, id, ...(req.subject.properties ? { properties: req.subject.properties } : {}) };
    const facts = await memo.subject(subject);
    if (!facts.found) return undefined;
    // A stored candidate no relationship names is worth deciding only when a role or rule could grant it.
    if (!granted.has(id) && !mayBeGranted(policy, facts.subject, relation, resource.type)) return undefined;
    const q = { subject, relation, object, resourceProperties: resource.properties, context: context(req) };
    return (await allows(ctx, policy, memo, q)) ? { type, id } : undefined;
  }, ctx.config.authzenSearchMaxCandidates);
}

/**
 * Resource search. Candidates: when the action is a relation of the resource type, the objects
 * the relationships give the subject it on (reverse expansion); when a role or rule could grant
 * the subject the action on the type, also the stored entities of the type. Each is then
 * decided (dry), in order, until the page is full.
 */
async function searchResources(ctx: AppContext, policy: PolicySet, memo: FactsMemo, req: SearchRequest): Promise<Paged<unknown>> {
  const type = req.resource.type;
  const subject = req.subject as Subject;
  const facts = await memo.subject(subject);
  if (!facts.found) return collectPage<Entity>('resource', req, [], () => undefined);
  const relation = relationOf(req.action!.name, type, policy.compiled.singulars);
  const related = modelRelation(policy, type, req.action!.name);
  const fromRelationships = related ? await objectsHolding(ctx, policy, subject, related, type, context(req)) : [];
  const stored = mayBeGranted(policy, facts.subject, relation, type) ? sortedIds(await storedEntityIds(ctx, type)) : [];
  const ids = mergeSorted(fromRelationships, stored);
  return collectPage('resource', req, ids, async (id) => {
    const q = { subject, relation, object: objectOf(type, id), resourceProperties: req.resource.properties, context: context(req) };
    return (await allows(ctx, policy, memo, q)) ? { type, id } : undefined;
  }, ctx.config.authzenSearchMaxCandidates);
}

async function searchActions(ctx: AppContext, policy: PolicySet, memo: FactsMemo, req: SearchRequest): Promise<Paged<unknown>> {
  const { resource } = req;
  const named = req.subject as Subject;
  const subject = await memo.subject(named);
  if (!subject.found) return collectPage('action', req, [], () => undefined);
  const names = await candidateActions(ctx, policy, subject.subject, resource.type);
  const plural = pluralOf(resource.type, policy.compiled.singulars);
  const object = objectOf(resource.type, resource.id!);
  return collectPage('action', req, sortedIds(names), async (name) => {
    const relation = `${name}:${plural}`;
    if (!modelRelation(policy, resource.type, name) && !mayBeGranted(policy, subject.subject, relation, resource.type)) return undefined;
    const q = { subject: named, relation, object, resourceProperties: resource.properties, context: context(req) };
    return (await allows(ctx, policy, memo, q)) ? { name } : undefined;
  }, ctx.config.authzenSearchMaxCandidates);
}

/**
 * The action names worth deciding for this subject on objects of `kind`. An agent can be
 * allowed only its capabilities. Anyone else: the names its permissions and the policy's rules
 * give for the kind and, when a wildcard action (`*:<kinds>`, `*:*`) could grant it something,
 * every concrete action name Gatehouse knows, since any of them may then be allowed.
 */
async function candidateActions(ctx: AppContext, policy: PolicySet, subject: SubjectFacts, kind: string): Promise<Set<string>> {
  const plural = pluralOf(kind, policy.compiled.singulars);
  const names = new Set<string>();
  if (subject.capabilities) {
    for (const c of subject.capabilities) if (c.name.endsWith(`:${plural}`)) names.add(actionOfRelation(c.name));
    return names;
  }
  for (const p of subject.permissions) {
    const i = p.indexOf(':');
    const verb = p.slice(0, i);
    if (i > 0 && verb !== '*' && (p.slice(i + 1) === plural || p.slice(i + 1) === '*')) names.add(verb);
  }
  for (const relation of relationsForKind(policy, kind)) names.add(actionOfRelation(relation));
  // The relations the model declares on the kind are actions too (granted through relationships).
  for (const relation of policy.compiled.relations?.types.get(kind)?.relations.keys() ?? []) names.add(relation);
  if (wildcardActionGrants(policy, subject, kind)) for (const name of await knownActionNames(ctx, policy)) names.add(name);
  return names;
}

/** The identifiers of the stored entities of one type, read page by page. */
async function storedEntityIds(ctx: AppContext, type: string): Promise<string[]> {
  const ids: string[] = [];
  for (let offset = 0; ; offset += ENTITY_PAGE) {
    const page = await ctx.store.entities.list(type, ENTITY_PAGE, offset);
    for (const e of page) ids.push(e.id);
    if (page.length < ENTITY_PAGE) return ids;
  }
}
const ENTITY_PAGE = 1000;
