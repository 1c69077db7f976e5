// The cases of the membership tests (`in`, `contains` over empty and mistyped lists), shared by
// the evaluator's tests and diff's brute force.
import type { DecisionRequest, SubjectFacts } from '../../src/policy/index.js';
import { NOWS } from './helpers.js';

export const SCHEMA = 'schema {\n  context.code: string\n  context.labels: [string]\n  resource.codes: [string]\n  resource.name: string\n}\n';

/** A one-rule policy on `read:docs`, with or without the schema above. */
export function membershipPolicy(effect: string, when: string, schema: boolean): string {
  return `${schema ? SCHEMA : ''}rule "r" {\n  effect ${effect}\n  subjects "agent:*"\n  relation "read:docs"\n  object "doc:*"\n  when ${when}\n}\n`;
}

export const MEMBERSHIP_CONDITIONS = [
  'context.code in resource.codes',
  'not (context.code in resource.codes)',
  'context.code not in resource.codes',
  'resource.codes contains context.code',
  'not (resource.codes contains context.code)',
  'context.code in subject.roles',
  'not (context.code in subject.roles)',
  'resource.codes contains any context.labels',
  'not (resource.codes contains all context.labels)',
  'context.code in ["main"]',
  'not (context.code in ["main"])',
  'resource.codes contains any ["main"]',
  // a declared value of another type is compared with nothing, also by == and has-guarded tests
  'context.code == resource.name',
  'context.code != resource.name',
  'not (context has code) or context.code != "x"',
];

/** Every combination of a few values, each missing, of the wrong type, an empty list or a list of either type. */
export function* membershipRequests(): Generator<DecisionRequest> {
  const codes = [-2, 'main', 'x', true, undefined];
  const lists = [[], ['main'], [-2], [true], [false], 'main', undefined];
  const labels = [[], ['main'], [-2], [false], undefined];
  const roles = [[], ['main']];
  const names = [-2, 'main', undefined];
  for (const code of codes) for (const list of lists) for (const label of labels) for (const role of roles) for (const name of names) for (const granted of [true, false]) {
    const subject: SubjectFacts = {
      type: 'agent', id: 'a', mode: 'autonomous', roles: role, groups: [], permissions: granted ? ['read:docs'] : [], attributes: {},
      capabilities: [{ name: 'read:docs' }],
    };
    const r: DecisionRequest = { subject, action: 'read:docs', resource: 'doc:1', context: {}, now: NOWS[0]!, resourceAttributes: {}, approved: false };
    if (code !== undefined) r.context.code = code;
    if (label !== undefined) r.context.labels = label;
    if (list !== undefined) r.resourceAttributes!.codes = list;
    if (name !== undefined) r.resourceAttributes!.name = name;
    yield r;
  }
}
