// `policy replay`: the decisions recorded in the audit trail, decided again under a draft.
//
// The order:
//  1. read the trail's decision records of the window, newest first, a page at a time;
//  2. a record refused before the policy was asked stays as recorded; every other request is
//     rebuilt from its record: action, object, context as kept (a redacted field is its digest
//     object, so a condition on it fails closed), and the facts the decision read
//     (subject, person, object attributes, entities, usage of limits over time, the clock);
//     a record without facts (written before records kept them) is rebuilt from the current
//     facts where a loader is given, else left out; both are counted in `notes`;
//  3. decide it with the draft as the pipeline does (decideChain: over a delegation chain's
//     agents where the record has one), relationships as they are now (records do not keep them);
//     a person's answer the record shows to an approval answers the draft's approval_required too;
//  4. group the records whose decision changes by (recorded decision → draft decision), with up
//     to EXAMPLES real examples each.
// Pure but for reading the trail and the loader; never writes.

import type { AuditRecord } from '../store/audit.js';
import type { Store } from '../store/index.js';
import type { AuditFacts } from './core.js';
import { decideChain } from './chain.js';
import { atomsOf, relQuestionsOf } from '../policy/ast.js';
import type { Attributes, DecisionRequest, PersonFacts, PolicySet, SubjectFacts } from './policy-interface.js';

export interface ReplayExample { audit_id: number; agent_id: string | null; action: string | null; resource: string | null }
export interface ReplayChange { before: string; after: string; count: number; examples: ReplayExample[] }
export interface ReplayResult {
  from: string;
  to: string;
  decisions: number;
  changed: number;
  changes: ReplayChange[];
  /** What the replay could not take from the records as they are, and what it did instead. */
  notes: string[];
}

/** The facts of a record without its own: the subject, person and object attributes as they are now. */
export interface CurrentFacts { subject: SubjectFacts; person: PersonFacts | null; resourceAttributes: Attributes }
export type CurrentFactsLoader = (r: AuditRecord) => Promise<CurrentFacts | null>;

export interface ReplayOptions {
  /** unix seconds, inclusive */
  since: number;
  until: number;
  /** For records without facts: their current facts (none: such records are left out). */
  current?: CurrentFactsLoader;
  /** The relationships the grant step and relationship questions read (as they are now). */
  relationships?: DecisionRequest['relationships'];
}

export const EXAMPLES = 5;
const PAGE = 1000;

/** A `--since` / `"since"` window: `7d`, `24h`, `30m`, `90s`; null when malformed. */
export function parseWindow(text: string): number | null {
  const m = /^(\d{1,6})([smhd])$/.exec(text.trim());
  if (!m) return null;
  return Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86_400 }[m[2] as 's' | 'm' | 'h' | 'd'];
}

/** The request a record was decided on, from its facts. */
export function requestOf(r: AuditRecord, facts: AuditFacts): DecisionRequest {
  const req: DecisionRequest = {
    subject: facts.subject,
    person: facts.person ?? null,
    action: r.action ?? '',
    resource: r.resource ?? '',
    context: (typeof r.context === 'object' && r.context !== null && !Array.isArray(r.context) ? r.context : {}) as Record<string, unknown>,
    now: facts.now,
  };
  if (facts.resource_attributes) req.resourceAttributes = facts.resource_attributes;
  if (facts.usage) req.usage = facts.usage;
  if (facts.approved) req.approved = true;
  if (facts.entities) req.entities = new Map(Object.entries(facts.entities));
  if (facts.chain) req.chain = facts.chain;
  return req;
}

function isFacts(f: unknown): f is AuditFacts {
  return typeof f === 'object' && f !== null && typeof (f as AuditFacts).now === 'number' && typeof (f as AuditFacts).subject === 'object';
}

/**
 * Causes decided before the policy is asked (a refused credential, a revoked agent or delegation,
 * an unknown subject, an action beyond the token's authorization details, a malformed request, no
 * policy): no draft changes them, so they are replayed as recorded.
 */
const BEFORE_POLICY = ['invalid_transaction_token', 'policy_unavailable', 'agent_revoked', 'invalid_request', 'unknown_tool', 'delegation_revoked', 'unknown_subject'];

export function refusedBeforePolicy(reason: string | null): boolean {
  if (reason === null) return false;
  const code = reason.split(':')[0]!;
  return BEFORE_POLICY.includes(code) || reason === 'constraint_violated: authorization_details';
}

/**
 * The draft's decision as the pipeline would give it for this record: where the record shows a
 * person's answer to an approval (`approval_denied`, `allowed: approved ...`), a draft that asks
 * for that approval gets the same answer.
 */
export function afterApproval(r: Pick<AuditRecord, 'reason'>, draft: string): string {
  if (draft !== 'approval_required' || r.reason === null) return draft;
  if (r.reason.startsWith('approval_denied')) return 'deny';
  if (r.reason.startsWith('allowed: approved')) return 'allow';
  return draft;
}

/** Does the draft read relationships (relation grants or relationship questions)? */
function readsRelationships(draft: PolicySet): boolean {
  return draft.compiled.files.some((f) => f.items.some((i) => i.kind === 'type'))
    || draft.compiled.rules.some((r) => r.ast.when !== undefined && relQuestionsOf(r.ast.when).length > 0);
}

/** Does any rule of the draft read a redacted context field? */
function readsField(draft: PolicySet, field: string): boolean {
  return draft.compiled.rules.some((r) => r.ast.when !== undefined && atomsOf(r.ast.when).some((a) => [a.left, a.right].some((o) => o.type === 'path' && o.root === 'context' && o.segs[0] === field)));
}

/** Accumulates re-decided records into the answer's groups. */
export class ReplayTally {
  decisions = 0;
  changed = 0;
  private groups = new Map<string, ReplayChange>();

  add(r: AuditRecord, after: string): void {
    this.decisions++;
    const before = r.decision ?? '';
    if (before === after) return;
    this.changed++;
    const k = `${before}\u0000${after}`;
    let g = this.groups.get(k);
    if (!g) this.groups.set(k, (g = { before, after, count: 0, examples: [] }));
    g.count++;
    if (g.examples.length < EXAMPLES) g.examples.push({ audit_id: r.seq, agent_id: r.agent_id, action: r.action, resource: r.resource });
  }

  changes(): ReplayChange[] {
    return [...this.groups.values()].sort((a, b) => b.count - a.count || (a.before + a.after).localeCompare(b.before + b.after));
  }
}

/** Re-decide the window's decision records under the draft. */
export async function replay(store: Pick<Store, 'audit'>, draft: PolicySet, opts: ReplayOptions): Promise<ReplayResult> {
  const tally = new ReplayTally();
  let withoutFacts = 0, fromCurrent = 0, redacted = 0, chains = 0, beforePolicy = 0;
  const redactedRead = new Set<string>();
  let before: number | undefined;
  for (;;) {
    const page = await store.audit.list({ kind: 'decision', since: opts.since, until: opts.until, limit: PAGE, ...(before !== undefined ? { before } : {}) });
    for (const r of page) {
      if (refusedBeforePolicy(r.reason)) { beforePolicy++; tally.add(r, r.decision ?? ''); continue; }
      let req: DecisionRequest;
      if (isFacts(r.facts)) req = requestOf(r, r.facts);
      else {
        const now = opts.current ? await opts.current(r) : null;
        if (!now) { withoutFacts++; continue; }
        fromCurrent++;
        req = { ...now, person: now.person, action: r.action ?? '', resource: r.resource ?? '', context: (r.context ?? {}) as Record<string, unknown>, now: r.time * 1000 };
      }
      for (const [k, v] of Object.entries(req.context)) {
        if (typeof v === 'object' && v !== null && Object.hasOwn(v, '$redacted')) { redacted++; if (readsField(draft, k)) redactedRead.add(k); }
      }
      if (opts.relationships) req.relationships = opts.relationships;
      if (req.chain) chains++;
      tally.add(r, afterApproval(r, decideChain(req, draft).decision));
    }
    if (page.length < PAGE) break;
    before = page[page.length - 1]!.seq;
  }
  const notes: string[] = [];
  if (fromCurrent) notes.push(`${fromCurrent} decisions were recorded without the facts they read: replayed with the current subject, person and object attributes`);
  if (withoutFacts) notes.push(`${withoutFacts} decisions were recorded without the facts they read and were not replayed (the server's POST /admin/v1/policy/replay replays them with the current facts)`);
  if (beforePolicy) notes.push(`${beforePolicy} decisions were refused before the policy was asked (credential, revocation, unknown subject, authorization details): unchanged by any draft`);
  if (chains) notes.push(`${chains} decisions went through a delegation chain: each agent's own usage of limits over time is not kept, and was read as none`);
  if (readsRelationships(draft)) notes.push(opts.relationships ? 'relationships are not kept in records: the draft read them as they are now' : 'relationships are not kept in records and were not read: relation grants and relationship questions answered as with none');
  if (redactedRead.size) notes.push(`the draft reads context fields kept only as digests (${[...redactedRead].sort().join(', ')}): their conditions fail closed on replay`);
  else if (redacted) notes.push('some context fields are kept only as digests; the draft does not read them');
  return {
    from: new Date(opts.since * 1000).toISOString(),
    to: new Date(opts.until * 1000).toISOString(),
    decisions: tally.decisions,
    changed: tally.changed,
    changes: tally.changes(),
    notes,
  };
}
