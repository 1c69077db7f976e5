// `explain`: a decision and every check that led to it. `explainDecision` gives
// the data (each rule with the values it read and why it applied or not); the
// CLI prints it.

import { decideOverChain } from './chain.js';
import type { Decision, DecisionRequest, PersonFacts, SubjectFacts } from './types.js';
import type { PolicySet } from './compile.js';
import { decideWith } from './decide.js';
import { readUsageFacts } from './usage.js';

/** The decision with a full trace: every rule of the action and object, what it read, and why it applied or not. */
export function explainDecision(request: DecisionRequest, set: PolicySet): Decision {
  // Over a delegation chain, every agent's decision, as the server makes it.
  return decideOverChain(request, (r) => decideWith(r, set, { explain: true }));
}

type Raw = Record<string, any>;

function obj(v: unknown): Raw | null {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Raw) : null;
}

function strings(v: unknown): string[] | undefined {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : undefined;
}

/**
 * Fill what a hand-written explain request leaves out, assuming nothing the server would not
 * grant: permissions are only those given (none given is none held, for the agent and for the
 * person it acts for: grants come from roles in the database, which the CLI does not see); the
 * mode is delegated when a person is given, else autonomous, as the server derives it; the
 * clock is this moment; an agent without stated capabilities holds the capability of the action
 * asked (the request is about the rules, not the registration). Each of these is listed in
 * `assumed`, with how to state it instead. A diff example names every fact it needs
 * (permissions, capabilities, the clock), so it explains to the decision the diff reported.
 *
 * Takes a diff example (`subject`, `person`, `action`, `resource`, `resource_attributes`,
 * `context`, `now`) or the older shape (`agent` or `agent_id`, `person` or `person_id`).
 */
export function completeRequest(raw: unknown, clock: () => number = Date.now): { request: DecisionRequest; assumed: string[] } {
  const r = obj(raw) ?? {};
  const assumed: string[] = [];
  const action = typeof r.action === 'string' ? r.action : '';
  const rawSubject = obj(r.subject) ?? obj(r.agent) ?? { id: typeof r.agent === 'string' ? r.agent : typeof r.agent_id === 'string' ? r.agent_id : r.user_id };
  const type: SubjectFacts['type'] = rawSubject.type === 'user' || (!r.subject && !r.agent && !r.agent_id && typeof r.user_id === 'string') ? 'user' : 'agent';
  let rawPerson = obj(r.person) ?? (typeof r.person === 'string' ? { id: r.person } : typeof r.person_id === 'string' ? { id: r.person_id } : null);
  if (type === 'user') rawPerson = null;
  const subject: SubjectFacts = {
    type,
    id: typeof rawSubject.id === 'string' ? rawSubject.id : '',
    roles: strings(rawSubject.roles) ?? [],
    groups: strings(rawSubject.groups) ?? [],
    permissions: strings(rawSubject.permissions) ?? [],
    attributes: obj(rawSubject.attributes) ?? {},
  };
  for (const k of ['name', 'email'] as const) if (typeof rawSubject[k] === 'string') subject[k] = rawSubject[k];
  if (!Array.isArray(rawSubject.permissions)) assumed.push(`${type} ${subject.id} holds no permissions (none given: state them as "permissions" of the ${r.subject ? 'subject' : 'agent'}, or --permissions)`);
  if (type === 'agent') {
    if (rawSubject.mode === 'delegated' || rawSubject.mode === 'autonomous') subject.mode = rawSubject.mode;
    else { subject.mode = rawPerson ? 'delegated' : 'autonomous'; assumed.push(`mode ${subject.mode}`); }
    if (Array.isArray(rawSubject.capabilities)) {
      subject.capabilities = rawSubject.capabilities.map((c: unknown) => (typeof c === 'string' ? { name: c } : (c as { name: string })));
    } else { subject.capabilities = [{ name: action }]; assumed.push(`agent holds capability ${action} (none given: state them as "capabilities", or --capabilities)`); }
  }
  const request: DecisionRequest = { subject, action, resource: typeof r.resource === 'string' ? r.resource : '', context: obj(r.context) ?? {}, now: 0 };
  const attrs = obj(r.resource_attributes) ?? obj(r.resourceAttributes);
  if (attrs) request.resourceAttributes = attrs;
  // Stored entities that references in the request lead to: `{"customer:c-1": {"fraud": true}}`; a reference to none is missing.
  const entities = obj(r.entities);
  if (entities) request.entities = new Map(Object.entries(entities).map(([k, v]) => [k, obj(v) ?? null]));
  if (rawPerson) {
    const p: PersonFacts = {
      id: typeof rawPerson.id === 'string' ? rawPerson.id : '',
      roles: strings(rawPerson.roles) ?? [],
      groups: strings(rawPerson.groups) ?? [],
      permissions: strings(rawPerson.permissions) ?? [],
      attributes: obj(rawPerson.attributes) ?? {},
    };
    if (typeof rawPerson.email === 'string') p.email = rawPerson.email;
    if (!Array.isArray(rawPerson.permissions)) assumed.push(`person ${p.id} holds no permissions (none given: state them as "permissions" of the person, or --person-permissions)`);
    request.person = p;
  }
  if (typeof r.now === 'number') request.now = r.now;
  else if (typeof r.now === 'string') request.now = Date.parse(r.now);
  else if (r.now === null) request.now = NaN;
  else { request.now = clock(); assumed.push(Number.isFinite(request.now) ? `now ${new Date(request.now).toISOString()}` : 'no clock'); }
  if (r.approved === true) request.approved = true;
  // A delegation chain, first agent to current: agent IDs or agent objects (`{id, attributes}`);
  // the subject is its last agent (added when the list stops above it).
  if (Array.isArray(r.chain) && subject.type === 'agent') {
    const agents = r.chain.flatMap((a: unknown): SubjectFacts[] => {
      const o = typeof a === 'string' ? { id: a } : obj(a);
      if (!o || typeof o.id !== 'string') return [];
      return [{ type: 'agent', id: o.id, mode: 'delegated', roles: strings(o.roles) ?? [], groups: [], permissions: strings(o.permissions) ?? [], attributes: obj(o.attributes) ?? {}, capabilities: subject.capabilities ?? [] }];
    });
    if (agents.length && agents[agents.length - 1]!.id === subject.id) agents.pop();
    if (agents.length) request.chain = { agents: [...agents, subject] };
  }
  // Prior usage of limits over time, as `{"count per 1h": 19}`; keys that do not read are left out.
  if (r.usage !== undefined) request.usage = readUsageFacts(r.usage).usage;
  return { request, assumed };
}
