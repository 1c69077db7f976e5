// The request a test block describes (`test "..." { ... }` in `*.policy` or `*.tests` files).

import type { DecisionRequest, JsonLimits, PersonFacts, SubjectFacts } from './types.js';
import type { TestNode } from './ast.js';
import { limitFieldsToJson } from './json.js';
import { parseInstant } from './validate.js';
import { addAmounts, normalizeUsageKey, usageLimitOf, usageLimitsToJson, type UsageFacts } from './usage.js';

/**
 * A test's request. An agent is autonomous unless marked delegated; a delegated agent has the
 * groups of its person too (as the server gives them). Without `now` the request has no clock,
 * so rules that read `time.*` fail closed: a test about time says when it runs. `used` lines
 * state prior usage of limits over time (none stated is none used).
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
    subject.capabilities = t.capabilities.map((c) => {
      if (!c.limits && !c.usage) return { name: c.name };
      const limits = limitFieldsToJson(c.limits ?? []);
      if (c.usage) usageLimitsToJson(c.usage.map((n) => usageLimitOf(n, `api:capability/${c.name}`)), limits);
      return { name: c.name, limits: limits as JsonLimits };
    });
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
  if (t.used?.length) {
    const usage: UsageFacts = {};
    for (const u of t.used) {
      const k = normalizeUsageKey(`${u.what === 'count' ? 'count' : `${u.what} sum`} per ${u.per}${u.scope !== undefined ? ` per ${u.scope}` : ''}`);
      if ('key' in k && typeof u.amount === 'number') usage[k.key] = addAmounts(usage[k.key] ?? 0, u.amount);
    }
    req.usage = usage;
  }
  if (t.approved) req.approved = true;
  return req;
}
