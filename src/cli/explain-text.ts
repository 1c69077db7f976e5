// `policy explain` as text: the decision, then every check in the order decide() made it,
// with the values each check read.

import type { Decision, DecisionRequest, TraceStep } from '../policy/types.js';

/** A value a check read (a path into the request and what it held); absent from older traces. */
interface Read { path: string; value: unknown; present: boolean }

function readsOf(t: TraceStep): Read[] {
  const reads = (t as TraceStep & { reads?: unknown }).reads;
  return Array.isArray(reads) ? (reads as Read[]) : [];
}

/** Why a rule applied or did not, in words, when the trace says. */
function whyOf(t: TraceStep): string | undefined {
  const why = (t as TraceStep & { why?: unknown }).why;
  return typeof why === 'string' && why ? why : undefined;
}

export function formatValue(v: unknown): string {
  if (v === undefined) return 'undefined';
  const s = JSON.stringify(v);
  return s.length > 80 ? s.slice(0, 77) + '...' : s;
}

export function explainText(req: DecisionRequest, d: Pick<Decision, 'decision' | 'reason' | 'policyVersion' | 'trace'>, assumed: string[]): string {
  const out: string[] = [];
  if (assumed.length) out.push(`assuming: ${assumed.join(', ')}`);
  const who = `${req.subject.type} ${req.subject.id}${req.person ? ` for ${req.person.id}` : ''}`;
  out.push(`request: ${who} ${req.action} ${req.resource} ${JSON.stringify(req.context ?? {})}`);
  if (req.chain && req.chain.agents.length > 1) out.push(`chain: ${req.chain.agents.map((a) => a.id).join(' → ')} (every agent decided; the last acts)`);
  if (req.resourceAttributes && Object.keys(req.resourceAttributes).length) out.push(`resource attributes: ${JSON.stringify(req.resourceAttributes)}`);
  if (Number.isFinite(req.now)) out.push(`now: ${new Date(req.now).toISOString()}`);
  if (req.usage && Object.keys(req.usage).length) out.push(`usage: ${Object.entries(req.usage).map(([k, v]) => `${k} = ${v}`).join(', ')}`);
  out.push(`decision: ${d.decision}`);
  out.push(`reason: ${d.reason}`);
  out.push(`policy version: ${d.policyVersion}`);
  out.push('checks:');
  const w = Math.max(0, ...d.trace.map((t) => t.step.length));
  d.trace.forEach((t, i) => {
    const lead = `  ${String(i + 1).padStart(2)}. ${t.step.padEnd(w)}  ${t.outcome.padEnd(4)}  `;
    out.push(`${lead}${t.check}${t.source ? `  (${t.source})` : ''}`);
    const indent = ' '.repeat(lead.length);
    const why = whyOf(t);
    if (why) out.push(`${indent}why: ${why}`);
    const path = (t as TraceStep & { path?: unknown }).path;
    if (Array.isArray(path) && path.length) out.push(`${indent}path: ${path.join(' → ')}`);
    const reads = readsOf(t);
    if (reads.length) out.push(`${indent}read: ${reads.map((r) => `${r.path} = ${r.present ? formatValue(r.value) : '(missing)'}`).join(', ')}`);
  });
  return out.join('\n') + '\n';
}
