// `policy diff` as a process: a pair of policy sets too large to compare exactly answers at once
// with one line and exit 2 (it used to run for minutes), and a region over the clock names only
// what a request can be.
import { describe, expect, it } from 'vitest';
import { gatehouse, workDir } from './helpers.js';

// Two small sets whose exact diff needs more steps than a diff may spend: relations between the
// amount and an attribute, a budget per object, and subjects, actions and objects that overlap.
const WIDE_BEFORE = `policy "r" version 1

rule "rule-0" {
  effect require_approval
  subjects "role:editor"
  relation "*:refunds"
  object "refund:r1"
  when amount <= 10 and context.amount <= subject.max_amount and amount >= 0 and amount > 10 and context.amount > subject.max_amount
}

rule "rule-1" {
  effect require_approval
  subjects "role:editor", "group:eng"
  relation "*:*"
  object "*:r1"
  when context.amount != subject.max_amount
}

limits "delete:refunds" for "*" {
  amount max 100 min 0
  amount sum max 150 per 1d per resource
}
`;

const WIDE_AFTER = `policy "r" version 1

timezone "America/New_York"

rule "rule-0" {
  effect permit
  subjects "group:eng", "agent:spiffe://h/agent/*"
  relation "*:*"
  object "refund:*"
}

rule "rule-1" {
  effect deny
  subjects "user:u1", "user:*"
  relation "create:refunds"
  object "deployment:*"
}

limits "delete:refunds" for "*" {
  flag = true
  currency not_in ["EUR"]
  amount min 0
  amount sum max 100 per 24h
}
`;

const hours = (end: number) => `policy "r" version 1

timezone "Europe/Berlin"

rule "refunds-out-of-hours-wait" {
  effect require_approval
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when time.weekday in ["sat", "sun"] or time.hour < 8 or time.hour >= ${end}
}
`;

describe('gatehouse policy diff', () => {
  it('two sets too large to compare exactly: one line naming what was too large, exit 2, nothing on stdout', async () => {
    const dir = await workDir({ 'old/p.policy': WIDE_BEFORE, 'new/p.policy': WIDE_AFTER });
    const [text, asJson] = await Promise.all([gatehouse(['policy', 'diff', 'old', 'new'], dir), gatehouse(['policy', 'diff', 'old', 'new', '--json'], dir)]);
    for (const r of [text, asJson]) {
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^gatehouse policy diff: too large to compare exactly: .*\(more than \d+ steps\), on \S+ on \S+ by .+\n$/);
      expect(r.stderr.split('\n')).toHaveLength(2);
    }
    // the same input gives the same answer, word for word
    expect(asJson.stderr).toBe(text.stderr);
  });

  it('office hours moved from 18:00 to 17:00: the region names the hour and the weekday, not a missing hour', async () => {
    const dir = await workDir({ 'v1/p.policy': hours(18), 'v2/p.policy': hours(17) });
    const r = await gatehouse(['policy', 'diff', 'v1', 'v2'], dir);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('when time.hour == 17 and time.weekday is a string not in ["sat", "sun"] and permissions cover the action (time in Europe/Berlin): allow -> approval_required');
    expect(r.stdout).not.toContain('missing');
  });

  it('--budget: a budget too small refuses with exit 2 and names it; a budget that is no whole number is a usage error', async () => {
    const dir = await workDir({ 'v1/p.policy': hours(18), 'v2/p.policy': hours(17) });
    const small = await gatehouse(['policy', 'diff', 'v1', 'v2', '--budget', '3'], dir);
    expect(small.code).toBe(2);
    expect(small.stdout).toBe('');
    expect(small.stderr).toMatch(/more than 3 steps/);
    const bad = await gatehouse(['policy', 'diff', 'v1', 'v2', '--budget', 'lots'], dir);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--budget needs a whole number/);
    const enough = await gatehouse(['policy', 'diff', 'v1', 'v2', '--budget', '1000000'], dir);
    expect(enough.code).toBe(1);
  });
});
