import type { Request, Response, Router } from 'express';
import type { AppContext } from '../../context.js';
import { relationsInForce } from '../../authz/relationships.js';
import type { Relationship } from '../../policy/relations/tuple.js';
import { parseObject, parseSubject, relationshipText } from '../../policy/relations/tuple.js';
import { attributesProblem } from '../../admin/schemas.js';
import { button, code, errorList, escapeHtml as e, input, link, section, table, textarea, type Html } from '../html.js';
import { render } from './common.js';

/**
 * An object's relationships: what is stored on it, who holds each relation of its type and
 * through which relationships, and, for one person or agent, their access explained as the
 * path through the graph (or that none exists). Read-only: relationships are written through
 * the management API or the project file.
 */

/** Subjects shown per relation; the rest are counted. */
const SUBJECTS_SHOWN = 50;
/** Relationships shown as stored on the object. */
const STORED_SHOWN = 200;

const pathHtml = (path: Relationship[]): Html => path.map((r) => code(relationshipText(r))).join(' → ');

const query = (req: Request, name: string): string => {
  const v = req.query[name];
  return typeof v === 'string' ? v.trim() : '';
};

function pageLink(object: string, subject: string, relation: string): string {
  const q = new URLSearchParams({ object, subject, relation });
  return `/console/relationships?${q.toString()}`;
}

async function relationshipsPage(ctx: AppContext, req: Request, res: Response): Promise<void> {
  const object = query(req, 'object');
  const subject = query(req, 'subject');
  const relation = query(req, 'relation');
  const contextText = query(req, 'context');
  const problems: string[] = [];

  let context: Record<string, unknown> | undefined;
  if (contextText) {
    try {
      const parsed: unknown = JSON.parse(contextText);
      const p = attributesProblem(parsed);
      if (p) problems.push(`Context ${p}.`);
      else context = parsed as Record<string, unknown>;
    } catch {
      problems.push('Context must be a JSON object, such as {"hour": 10}.');
    }
  }
  const obj = object ? parseObject(object) : null;
  if (typeof obj === 'string') problems.push(obj);
  const subj = subject ? parseSubject(subject) : null;
  if (typeof subj === 'string') problems.push(subj);

  const { model, checker } = await relationsInForce(ctx);
  const type = obj && typeof obj !== 'string' ? model.types.get(obj.type) : undefined;
  if (obj && typeof obj !== 'string' && !type) problems.push(`The policy in force declares no type ${obj.type}.`);
  if (type && relation && !type.relations.has(relation)) problems.push(`Type ${type.name} has no relation ${relation}.`);

  const form = `<form method="get" action="/console/relationships" class="stack" id="relationship-form">
${input({ name: 'object', label: 'Object', value: object, placeholder: 'document:1', hint: 'An object, <type>:<id>.' })}
${input({ name: 'subject', label: 'Person or agent (optional)', value: subject, placeholder: 'user:anne', hint: 'user:<person id> or agent:<agent id>: their access explained as the path.' })}
${input({ name: 'relation', label: 'Relation (optional)', value: relation, placeholder: 'viewer', hint: 'Only this relation; every relation of the type when empty.' })}
${textarea({ name: 'context', label: 'Context (optional)', value: contextText, rows: 2, mono: true, hint: 'Values for conditions, as JSON: {"hour": 10}.' })}
${button('Show', { kind: 'plain' })}
</form>`;

  const parts: Html[] = [form];
  if (problems.length) parts.push(errorList(problems));
  else if (obj && type) {
    const relations = relation ? [relation] : [...type.relations.keys()];
    const opts = context ? { context, path: true } : { path: true };

    if (subj) {
      const rows = relations.map((r) => {
        const answer = checker.check(object, r, subject, opts);
        if ('error' in answer) return [code(r), `<span class="field-error">${e(`cannot be resolved: ${answer.error.message}`)}</span>`];
        return [code(r), answer.allowed ? `holds it through ${pathHtml(answer.path)}` : 'does not hold it: no relationship leads from the object to them'];
      });
      parts.push(section(`Access of ${subject} to ${object}`, table(['Relation', 'Answer'], rows), { id: 'access' }));
    }

    const entityTypes = [...model.types.keys()];
    const holders: Html[][] = [];
    for (const r of relations) {
      for (const t of entityTypes) {
        const listed = checker.listSubjects(object, r, t, context ? { context } : undefined);
        if (listed.error) {
          holders.push([code(r), e(t), `<span class="field-error">${e(`cannot be resolved: ${listed.error.message}`)}</span>`]);
          continue;
        }
        for (const s of listed.subjects.slice(0, SUBJECTS_SHOWN)) {
          const answer = checker.check(object, r, s, opts);
          const through = 'error' in answer ? e(answer.error.message) : answer.allowed ? pathHtml(answer.path) : '';
          holders.push([code(r), link(pageLink(object, s, r), s), through]);
        }
        if (listed.subjects.length > SUBJECTS_SHOWN) holders.push([code(r), e(`and ${listed.subjects.length - SUBJECTS_SHOWN} more ${t}`), '']);
      }
    }
    parts.push(section(`Who holds what on ${object}`, table(['Relation', 'Subject', 'Through'], holders, { empty: 'No one holds a relation on it.' }), { id: 'holders' }));

    const stored = await ctx.store.relationships.page({ object }, STORED_SHOWN);
    const storedRows = stored.data.map((s) => [code(s.relation), code(s.subject), s.condition ? code(`${s.condition.name} ${JSON.stringify(s.condition.context ?? {})}`) : '']);
    parts.push(section(`Stored on ${object}`, table(['Relation', 'Subject', 'Condition'], storedRows, { empty: 'Nothing is stored on it directly.' }) + (stored.next ? `<p class="hint">${e(`The first ${STORED_SHOWN} are shown.`)}</p>` : ''), { id: 'stored' }));
  }

  render(ctx, req, res, problems.length ? 400 : 200, {
    title: 'Relationships',
    section: 'relationships',
    lead: 'Who relates to what: an object’s relationships, and a person’s or agent’s access to it explained as the path through the graph.',
    body: parts.join('\n'),
  });
}

export function relationshipPages(router: Router, ctx: AppContext): void {
  router.get('/relationships', (req, res) => relationshipsPage(ctx, req, res));
}
