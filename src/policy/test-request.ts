// The request a test block describes (`test "..." { ... }` in `*.policy` or `*.tests` files).

import type { DecisionRequest, JsonLimits, PersonFacts, SubjectFacts } from './types.js';
import type { TestNode } from './ast.js';
import { limitFieldsToJson } from './json.js';
import { parseInstant } from './validate.js';

/**
 * A test's request. An agent is autonomous unless marked delegated; a delegated agent has the
 * groups of its person too (as the server gives them). Without `now` the request has no clock,
 * so rules that read `time.*` fail closed: a test about time says when it runs.
 */
export function testRequest(t: TestNode): DecisionRequest {
  const f = t.facts ?? {};
  const user = t.user !== undefined && t.agent === undefined;
  const mode = t.agent?.mode === 'delegated' ? 'delegated' : 'autonomous';
  const subject: SubjectFacts = {
    type: user ? 'user' : 'agent',
    id: user ? t.user!.id : (t.agent?.id ?? ''),
    roles: f.roles ?? [],
    groups: f.groups ?? [],
    permissions: t.permissions ?? [],
    attributes: (f.attributes ?? {}) as Record<string, unknown>,
  };
  if (f.email !== undefined) subject.email = f.email;
  if (!user) {
    subject.mode = mode;
    subject.capabilities = t.capabilities.map((c) => ({ name: c.name, ...(c.limits ? { limits: limitFieldsToJson(c.limits) as JsonLimits } : {}) }));
  }
  const req: DecisionRequest = {
    subject,
    action: t.action ?? '',
    resource: t.resource ?? '',
    context: (t.context ?? {}) as Record<string, unknown>,
    now: t.now !== undefined ? (parseInstant(t.now) ?? NaN) : NaN,
  };
  if (t.resourceAttributes) req.resourceAttributes = t.resourceAttributes as Record<string, unknown>;
  if (t.person && !user) {
    const p = t.person;
    const person: PersonFacts = {
      id: p.id, roles: p.roles ?? [], groups: p.groups ?? [], permissions: p.permissions, attributes: (p.attributes ?? {}) as Record<string, unknown>,
    };
    if (p.email !== undefined) person.email = p.email;
    req.person = person;
    if (mode === 'delegated') subject.groups = [...new Set([...subject.groups, ...person.groups])];
  }
  if (t.approved) req.approved = true;
  return req;
}
