import type { Router } from 'express';
import type { AppContext } from '../context.js';
import { errors, ProtocolError } from '../errors.js';
import { convertValue } from '../policy/relations/conditions.js';
import { disallowed, type RelationModel } from '../policy/relations/model.js';
import type { RelationError } from '../policy/relations/checker.js';
import type { Relationship } from '../policy/relations/tuple.js';
import { relationModel, relationsInForce } from '../authz/relationships.js';
import { decodePageToken } from '../store/relationships.js';
import { adminRoute, bodyOrEmpty, parseWith } from './route.js';
import {
  relationshipCheck,
  relationshipCheckResult,
  relationshipListObjects,
  relationshipListQuery,
  relationshipListSubjects,
  relationshipObjects,
  relationshipPage,
  relationshipSubjects,
  relationshipWrite,
  relationshipWriteResult,
} from './schemas.js';

/**
 * Relationships: who relates to what. Writes are checked against the model of the policy in
 * force (its types, relations and conditions) and applied all or nothing; the questions
 * (check, list-objects, list-subjects) are answered from this process's relationship graph,
 * which follows every committed change, with the request's own context and contextual
 * relationships. A relationship the model no longer allows may still be deleted (it stays
 * stored, ignored, until it is).
 */

const invalid = (path: string, message: string): ProtocolError =>
  errors.invalidRequest(`${path}: ${message}`, { issues: [{ path, message, code: 'custom' }] });

/**
 * Why the model does not allow a relationship, or null: its type, relation, kind of subject
 * and condition (`disallowed`), and the condition's stored context, whose names must be the
 * condition's parameters and whose values must convert to their types.
 */
export function relationshipProblem(model: RelationModel, r: Relationship): string | null {
  const why = disallowed(model, r);
  if (why || !r.condition?.context) return why;
  const condition = model.conditions.get(r.condition.name)!;
  for (const [name, value] of Object.entries(r.condition.context)) {
    const param = condition.params.find((p) => p.name === name);
    if (!param) return `condition ${condition.name} has no parameter ${name} (it has ${condition.params.map((p) => p.name).join(', ')})`;
    try {
      convertValue(value, param.type, `condition.context.${name}`);
    } catch (err) {
      return (err as Error).message;
    }
  }
  return null;
}

/** The first relationship of a list the model does not allow, as the 400 naming its index and why. */
function checkAgainstModel(model: RelationModel, list: readonly Relationship[], field: string): void {
  for (let i = 0; i < list.length; i++) {
    const why = relationshipProblem(model, list[i]!);
    if (why) throw invalid(`${field}.${i}`, why);
  }
}

/** A relationship question the engine could not answer, as its 400 (naming `context.<parameter>` when the request lacks one a condition needs). */
function questionError(e: RelationError): ProtocolError {
  if (e.code === 'resolution_too_complex') return errors.resolutionTooComplex(e.message);
  if (e.missing !== undefined) return invalid(`context.${e.missing}`, e.message);
  return errors.invalidRequest(e.message);
}

/**
 * Deletes, then writes, all or nothing; each write the model of the policy in force must
 * allow (a 400 naming the first that it does not, and nothing is written).
 */
export async function writeRelationships(ctx: AppContext, writes: readonly Relationship[], deletes: readonly Relationship[]): Promise<{ written: number; deleted: number }> {
  const model = relationModel((await ctx.policy.state()).set);
  checkAgainstModel(model, writes, 'writes');
  return ctx.store.relationships.apply(writes, deletes);
}

/** A question's contextual relationships, checked against the model like writes. */
function contextual(model: RelationModel, list: Relationship[] | undefined): Relationship[] | undefined {
  if (!list?.length) return undefined;
  checkAgainstModel(model, list, 'contextual_relationships');
  return list;
}

export function relationshipRoutes(router: Router, ctx: AppContext): void {
  const tags = ['relationships'];

  adminRoute(
    router,
    {
      method: 'post', path: '/relationships', tags,
      summary: 'Write and delete relationships, all or nothing (deletes first); the next decision on every instance uses them',
      request: relationshipWrite,
      responses: { 200: { description: 'applied: how many were written and deleted', schema: relationshipWriteResult } },
    },
    async (req, res) => {
      const { writes, deletes } = parseWith(relationshipWrite, bodyOrEmpty(req));
      res.json(await writeRelationships(ctx, writes, deletes));
    },
  );

  adminRoute(
    router,
    {
      method: 'get', path: '/relationships', tags,
      summary: 'List relationships, a page at a time, filtered by object (`document:1`, or `document:` for a type), relation and subject',
      query: relationshipListQuery,
      responses: { 200: { description: 'a page; `next_page_token` is null on the last', schema: relationshipPage } },
    },
    async (req, res) => {
      // An empty parameter (`?object=&limit=`, as forms and URLSearchParams send it) is one not given.
      const given = Object.fromEntries(Object.entries(req.query).filter(([, v]) => v !== ''));
      const q = parseWith(relationshipListQuery, given, 'query');
      let after;
      if (q.page_token !== undefined) {
        after = decodePageToken(q.page_token);
        if (!after) throw invalid('page_token', 'is not a page token of this listing');
      }
      const page = await ctx.store.relationships.page({ object: q.object, relation: q.relation, subject: q.subject }, q.limit, after);
      res.json({ data: page.data, next_page_token: page.next ?? null });
    },
  );

  adminRoute(
    router,
    {
      method: 'post', path: '/relationships/check', tags,
      summary: 'Does the subject hold the relation on the object? With the relationships that grant it',
      request: relationshipCheck,
      responses: { 200: { description: '`path`: the relationships that granted it, in order (empty when not allowed)', schema: relationshipCheckResult } },
    },
    async (req, res) => {
      const q = parseWith(relationshipCheck, bodyOrEmpty(req));
      const { model, checker } = await relationsInForce(ctx);
      const r = checker.check(q.object, q.relation, q.subject, { context: q.context, contextual: contextual(model, q.contextual_relationships), path: true });
      if ('error' in r) throw questionError(r.error);
      res.json({ allowed: r.allowed, path: r.path });
    },
  );

  adminRoute(
    router,
    {
      method: 'post', path: '/relationships/list-objects', tags,
      summary: 'Every object of a type on which the subject holds the relation, each once',
      request: relationshipListObjects,
      responses: { 200: { description: 'the objects, sorted', schema: relationshipObjects } },
    },
    async (req, res) => {
      const q = parseWith(relationshipListObjects, bodyOrEmpty(req));
      const { model, checker } = await relationsInForce(ctx);
      const r = checker.listObjects(q.subject, q.relation, q.type, { context: q.context, contextual: contextual(model, q.contextual_relationships) });
      if (r.error) throw questionError(r.error);
      res.json({ objects: r.objects });
    },
  );

  adminRoute(
    router,
    {
      method: 'post', path: '/relationships/list-subjects', tags,
      summary: 'Every subject of a type (or userset `<type>#<relation>`) that holds the relation on the object, each once',
      request: relationshipListSubjects,
      responses: { 200: { description: 'the subjects, sorted (`<type>:*` when a wildcard grants it)', schema: relationshipSubjects } },
    },
    async (req, res) => {
      const q = parseWith(relationshipListSubjects, bodyOrEmpty(req));
      const { model, checker } = await relationsInForce(ctx);
      const r = checker.listSubjects(q.object, q.relation, q.subject_type, { context: q.context, contextual: contextual(model, q.contextual_relationships) });
      if (r.error) throw questionError(r.error);
      res.json({ subjects: r.subjects });
    },
  );
}
