import { describe, expect, it, beforeAll } from 'vitest';
import { mkdtemp, writeFile, readFile, cp, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runPolicyCommand } from '../../src/cli/policy.js';
import { REFUNDS_EXAMPLE } from './helpers.js';

async function run(args: string[], cwd: string) {
  let out = '', err = '';
  const code = await runPolicyCommand(args, { stdout: (s) => { out += s; }, stderr: (s) => { err += s; }, cwd });
  return { code, out, err };
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gh-policy-'));
  await cp(join(process.cwd(), 'policies', 'examples'), join(dir, 'policies'), { recursive: true });
  await mkdir(join(dir, 'v1'));
  await mkdir(join(dir, 'v2'));
  await writeFile(join(dir, 'v1', 'refunds.policy'), REFUNDS_EXAMPLE);
  await writeFile(join(dir, 'v2', 'refunds.policy'), REFUNDS_EXAMPLE.replace('amount > 10000', 'amount > 5000'));
  await mkdir(join(dir, 'bad'));
  await writeFile(join(dir, 'bad', 'a.policy'), 'rule "r" {\n  effect allow\n  subjects "agent:*"\n  relation "a:b"\n  object "b:*"\n  when x => 1\n}\n');
  await writeFile(join(dir, 'bad', 'b.policy'), 'rule "r2" {\n  when\n}\n');
});

describe('gatehouse policy', () => {
  it('check: ok for the example policies', async () => {
    const r = await run(['check', 'policies'], dir);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^ok: \d+ files, \d+ rules, \d+ tests; policy version [a-z-]+@\d+(,[a-z-]+@\d+)*#[0-9a-f]{12}\n$/);
    expect(r.out).toMatch(/data-exports@\d+,deployments@\d+,.*refunds@\d+[,#]/);
  });
  it('check: every error as file:line:col: message, exit 1', async () => {
    const r = await run(['check', 'bad'], dir);
    expect(r.code).toBe(1);
    expect(r.err.split('\n').filter((l) => /^bad\//.test(l))).toEqual([
      'bad/a.policy:2:10: unknown effect "allow" (use deny, require_approval or permit)',
      'bad/a.policy:6:8: unknown operator "=>" (use >=, >, <=, <, == or !=)',
      expect.stringMatching(/^bad\/b\.policy:3:1: expected /),
    ]);
  });
  it('test: runs the tests beside the example policies', async () => {
    const r = await run(['test', 'policies'], dir);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/\d+ passed, 0 failed/);
  });
  it('test: a failing test exits 1', async () => {
    await mkdir(join(dir, 'failing'), { recursive: true });
    await writeFile(join(dir, 'failing', 'r.policy'), REFUNDS_EXAMPLE);
    await writeFile(join(dir, 'failing', 'r.tests'), 'test "t" {\n  agent "x"\n  action "create:refunds"\n  resource "refund:1"\n  context { amount: 1 }\n  expect allow\n}\n');
    const r = await run(['test', 'failing'], dir);
    expect(r.code).toBe(1);
    expect(r.out).toContain('FAIL  t (failing/r.tests:1): expected allow, got deny "not_granted: create:refunds (capability)"');
  });
  it('fmt --check and fmt --write', async () => {
    await mkdir(join(dir, 'messy'), { recursive: true });
    await writeFile(join(dir, 'messy', 'm.policy'), 'rule "r" { effect deny subjects "agent:*" relation "a:b" object "b:*" }');
    expect((await run(['fmt', 'policies', '--check'], dir)).code).toBe(0);
    const c = await run(['fmt', '--check', 'messy'], dir);
    expect(c.code).toBe(1);
    expect(c.out).toBe('would reformat messy/m.policy\n');
    expect((await run(['fmt', 'messy', '--write'], dir)).code).toBe(0);
    expect(await readFile(join(dir, 'messy', 'm.policy'), 'utf8')).toBe('rule "r" {\n  effect deny\n  subjects "agent:*"\n  relation "a:b"\n  object "b:*"\n}\n');
    expect((await run(['fmt', '--check', 'messy'], dir)).code).toBe(0);
  });
  it('diff: exit 0 with no change, 1 with changes (--json), 2 on error', async () => {
    expect((await run(['diff', 'v1', 'v1/refunds.policy'], dir)).code).toBe(0);
    const r = await run(['diff', 'v1', 'v2', '--json'], dir);
    expect(r.code).toBe(1);
    const j = JSON.parse(r.out);
    expect(j.changes.length).toBeGreaterThan(0);
    for (const c of j.changes) expect(Object.keys(c)).toEqual(expect.arrayContaining(['subjects', 'relation', 'object', 'region', 'before', 'after', 'example']));
    const t = await run(['diff', 'v1', 'v2'], dir);
    expect(t.out).toContain('create:refunds on refund:* by agent:*');
    expect(t.out).toMatch(/when amount > 5000 and amount <= 10000 and .*: approval_required -> deny/);
    expect((await run(['diff', 'v1', 'bad'], dir)).code).toBe(2);
    expect((await run(['diff', 'v1', 'nope'], dir)).code).toBe(2);
    expect((await run(['diff', 'v1'], dir)).code).toBe(2);
  });
  it('explain: the decision and every check', async () => {
    const r = await run(['explain', 'v1', '--agent', 'spiffe://localhost/agent/billing', '--action', 'create:refunds', '--resource', 'refund:r1', '--context', '{"amount":700,"currency":"USD","channel":"api"}'], dir);
    expect(r.code).toBe(3); // deny
    expect(r.out).toContain('decision: deny');
    expect(r.out).toContain('reason: constraint_violated: amount max');
    expect(r.out).toMatch(/limits\s+fail\s+amount max 500 min 1\s+\(v1\/refunds\.policy:20\)/);
    const j = await run(['explain', 'v1', '--json', '--request', JSON.stringify({ agent: { id: 'a', permissions: ['create:refunds'] }, action: 'create:refunds', resource: 'refund:1', context: { amount: 2000, currency: 'USD' } })], dir);
    expect(JSON.parse(j.out)).toMatchObject({ decision: 'approval_required', reason: 'approval_required: approve-medium-refunds' });
    expect(j.code).toBe(4);
  });
  it('explain: a delegation chain, every agent decided and the chain shown', async () => {
    const request = {
      agent: { id: 'helper', permissions: ['create:refunds'] },
      person: { id: 'ada', permissions: ['create:refunds'] },
      chain: [{ id: 'boss', permissions: [] }, 'helper'],
      action: 'create:refunds', resource: 'refund:1', context: { amount: 20, currency: 'USD', channel: 'api' },
    };
    const r = await run(['explain', 'v1', '--request', JSON.stringify(request)], dir);
    expect(r.out).toContain('chain: boss → helper');
    expect(r.out).toContain('reason: not_granted: create:refunds (agent boss in the chain)');
    expect(r.code).toBe(3);
  });
  it('unknown commands exit 2', async () => {
    expect((await run(['frobnicate'], dir)).code).toBe(2);
  });
});
