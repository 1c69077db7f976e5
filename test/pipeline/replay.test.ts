// Replay: a recorded week of AuthZEN decisions (a set clock moving through it), decided again
// under three drafts, gives exactly the decisions fresh servers running each draft give for the
// same requests and facts: per request, and as the grouped counts of the answer. Runs on SQLite,
// and on PostgreSQL when GATEHOUSE_TEST_DATABASE_URL is set (the test servers follow it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { createApp, pdpPost, putUser, tokenFor } from '../authzen/helpers.js';
import { testServerUrl } from '../helpers/database.js';
import { gatehouse } from '../cli/helpers.js';

const BASE = `rule "people edit their own documents" {
  effect permit
  subjects "user:*"
  relation "update:documents"
  object "document:*"
  when resource.owner == subject.email
}

rule "big edits wait" {
  effect require_approval
  subjects "user:*"
  relation "update:documents"
  object "document:*"
  when context.size > 1000
}
`;

const DRAFTS: Record<string, string> = {
  // a lower threshold: more edits wait
  lower: BASE.replace('context.size > 1000', 'context.size > 500'),
  // no edits out of office hours
  hours: BASE + `
rule "office hours" {
  effect deny
  subjects "user:*"
  relation "update:documents"
  object "document:*"
  when time.hour < 8 or time.hour >= 18
}
`,
  // editors edit any document
  editors: BASE + `
rule "editors edit everything" {
  effect permit
  subjects "role:editor"
  relation "update:documents"
  object "document:*"
}
`,
};

const PEOPLE = [
  { id: 'ann', email: 'ann@example.com', roles: ['editor'] },
  { id: 'bob', email: 'bob@example.com', roles: [] as string[] },
  { id: 'cat', email: 'cat@example.com', roles: [] as string[] },
];

interface Asked { at: number; subject: string; owner: string; size: number | string; doc: string }

/** A deterministic week: 40 requests, one every 1 to 4 hours, from six and a half days ago. */
function week(): Asked[] {
  let seed = 20261127;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const start = Date.now() - 6.5 * 86_400_000;
  const out: Asked[] = [];
  let at = start;
  for (let i = 0; i < 40; i++) {
    at += Math.floor((1 + next() * 3) * 3_600_000);
    const p = PEOPLE[Math.floor(next() * PEOPLE.length)]!;
    const owner = PEOPLE[Math.floor(next() * PEOPLE.length)]!.email;
    const sizes = [10, 600, 900, 1500, 'big'] as const;
    out.push({ at, subject: p.id, owner, size: sizes[Math.floor(next() * sizes.length)]!, doc: `document:d${i}` });
  }
  return out;
}

const clockAt = { t: Date.now() };
const clock = { now: () => clockAt.t };

async function serverWith(policy: string): Promise<TestServer> {
  const server = await startTestServer({ policies: { 'docs.policy': policy }, clock });
  expect((await server.admin('POST', '/roles', { name: 'editor', permissions: [] })).status).toBe(201);
  for (const p of PEOPLE) await putUser(server, p);
  return server;
}

/** Ask the week through AuthZEN; the decisions (allow, deny, approval_required) as each record has it, in order. */
async function ask(server: TestServer, asked: Asked[]): Promise<string[]> {
  const base = server.ctx.urls.issuer;
  const api = `${base}/access/v1`;
  clockAt.t = asked[0]!.at - 60_000;
  const app = (await createApp(server, { type: 'm2m' })) as { client_id: string; client_secret: string };
  expect((await server.admin('PUT', `/applications/${app.client_id}/grants/${encodeURIComponent(api)}`, { scopes: [] })).status).toBe(204);
  for (const a of asked) {
    clockAt.t = a.at;
    // the set clock moves by hours: a token of its own for each request
    const token = await tokenFor(base, app, api);
    const [type, id] = a.doc.split(':');
    const res = await pdpPost(base, '/access/v1/evaluation', {
      subject: { type: 'user', id: a.subject }, action: { name: 'update' },
      resource: { type, id, properties: { owner: a.owner } }, context: { size: a.size },
    }, { authorization: `Bearer ${token}` });
    expect(res.status).toBe(200);
  }
  const records = (await server.ctx.store.audit.list({ kind: 'decision', limit: 1000 })).reverse();
  expect(records).toHaveLength(asked.length);
  return records.map((r) => r.decision!);
}

describe(`policy replay (${testServerUrl() ? 'PostgreSQL' : 'SQLite'})`, () => {
  const asked = week();
  let recorded: TestServer;
  let before: string[];
  beforeAll(async () => {
    recorded = await serverWith(BASE);
    before = await ask(recorded, asked);
    clockAt.t = asked[asked.length - 1]!.at + 60_000;
  }, 240_000);
  afterAll(async () => recorded?.stop());

  for (const [name, draft] of Object.entries(DRAFTS)) {
    it(`under the draft "${name}" gives what a fresh server with the draft gives`, async () => {
      clockAt.t = asked[asked.length - 1]!.at + 60_000;
      const r = await recorded.admin('POST', '/policy/replay', { since: '7d', files: { 'docs.policy': draft } });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const fresh = await serverWith(draft);
      let after: string[];
      try {
        after = await ask(fresh, asked);
      } finally {
        await fresh.stop();
      }
      const expected = new Map<string, number>();
      before.forEach((b, i) => { if (b !== after[i]) expected.set(`${b} -> ${after[i]}`, (expected.get(`${b} -> ${after[i]}`) ?? 0) + 1); });
      const got = new Map<string, number>((r.body.changes as { before: string; after: string; count: number }[]).map((c) => [`${c.before} -> ${c.after}`, c.count]));
      expect(got).toEqual(expected);
      expect(r.body.decisions).toBe(asked.length);
      expect(r.body.changed).toBe([...expected.values()].reduce((x, y) => x + y, 0));
      expect(r.body.changed).toBeGreaterThan(0);
      // Every example is a real record whose decision changes that way.
      const records = (await recorded.ctx.store.audit.list({ kind: 'decision', limit: 1000 })).reverse();
      for (const c of r.body.changes as { before: string; after: string; examples: { audit_id: number; action: string; resource: string }[] }[]) {
        for (const e of c.examples) {
          const i = records.findIndex((x) => x.seq === e.audit_id);
          expect(i).toBeGreaterThanOrEqual(0);
          expect([before[i], after[i], e.resource]).toEqual([c.before, c.after, asked[i]!.doc]);
        }
      }
      expect(Object.keys(r.body).sort()).toEqual(['changed', 'changes', 'decisions', 'from', 'notes', 'to']);
    }, 240_000);
  }

  it('takes draft rules as live and live rules as disabled', async () => {
    clockAt.t = asked[asked.length - 1]!.at + 60_000;
    const created = await recorded.admin('POST', '/rules', { name: 'no-big-docs', effect: 'deny', subjects: ['user:*'], relation: 'update:documents', object: 'document:*', condition: { field: 'size', op: 'gt', value: 800 } });
    expect(created.status).toBe(201);
    const r = await recorded.admin('POST', '/policy/replay', { since: '7d', enable: [created.body.id] });
    expect(r.status).toBe(200);
    // a size that is not a number fails the deny rule closed: denied too
    const expected = asked.filter((a, i) => (typeof a.size !== 'number' || a.size > 800) && before[i] !== 'deny').length;
    expect(r.body.changed).toBe(expected);
    expect(r.body.changes.every((c: { after: string }) => c.after === 'deny')).toBe(true);
    // Disabled again (it never went live): nothing changes.
    const none = await recorded.admin('POST', '/policy/replay', { since: '7d', disable: [created.body.id] });
    expect(none.body.changed).toBe(0);
    expect((await recorded.admin('POST', '/policy/replay', { since: 'a week' })).status).toBe(400);
    expect((await recorded.admin('POST', '/policy/replay', { enable: ['no-such-rule'] })).status).toBe(400);
  }, 60_000);

  it('the CLI replays a draft directory against the database, exit 1 when something changes', async () => {
    const dir = join(recorded.dir, 'draft');
    const url = recorded.ctx.config.databaseUrl;
    const db: Record<string, string> = url ? { GATEHOUSE_DATABASE_URL: url } : { GATEHOUSE_DB: join(recorded.dir, 'gatehouse.db') };
    const { mkdirSync } = await import('node:fs');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'docs.policy'), DRAFTS.lower!);
    const api = await recorded.admin('POST', '/policy/replay', { since: '7d', files: { 'docs.policy': DRAFTS.lower! } });
    const r = await gatehouse(['policy', 'replay', dir, '--since', '7d', '--json'], recorded.dir, db);
    expect(r.code, r.stderr).toBe(1);
    const j = JSON.parse(r.stdout);
    expect({ decisions: j.decisions, changed: j.changed, changes: j.changes }).toEqual({ decisions: api.body.decisions, changed: api.body.changed, changes: api.body.changes });
    writeFileSync(join(dir, 'docs.policy'), BASE);
    const same = await gatehouse(['policy', 'replay', dir], recorded.dir, db);
    expect(same.code, same.stderr).toBe(0);
    expect(same.stdout).toMatch(/^40 decisions from .* replayed: 0 change decision/);
  }, 60_000);
});

describe('GATEHOUSE_AUDIT_REDACT_CONTEXT', () => {
  it('keeps the named context fields as digests; a replay reading one says its conditions fail closed', async () => {
    const server = await startTestServer({ policies: { 'docs.policy': BASE }, clock, env: { GATEHOUSE_AUDIT_REDACT_CONTEXT: 'size, secret' } });
    try {
      await putUser(server, PEOPLE[1]!);
      const asked = week().slice(0, 3).map((a) => ({ ...a, subject: 'bob' }));
      await ask(server, asked);
      const records = await server.ctx.store.audit.list({ kind: 'decision' });
      const { createHash } = await import('node:crypto');
      for (const r of records) {
        const size = (r.context as { size: unknown }).size;
        const sent = asked.find((a) => a.doc === r.resource)!.size;
        expect(size).toEqual({ $redacted: { sha256: createHash('sha256').update(JSON.stringify(sent)).digest('hex') } });
      }
      clockAt.t = asked[2]!.at + 60_000;
      const r = await server.admin('POST', '/policy/replay', { since: '7d', files: { 'docs.policy': DRAFTS.lower! } });
      expect(r.status).toBe(200);
      expect(r.body.notes.join('\n')).toMatch(/context fields kept only as digests \(size\)/);
    } finally {
      await server.stop();
    }
  }, 60_000);
});

describe('replay of records the policy did not decide alone', async () => {
  const { refusedBeforePolicy, afterApproval } = await import('../../src/authz/replay.js');
  it('keeps refusals made before the policy, and a person\'s answer to an approval', () => {
    expect(refusedBeforePolicy('agent_revoked')).toBe(true);
    expect(refusedBeforePolicy('invalid_transaction_token: expired')).toBe(true);
    expect(refusedBeforePolicy('constraint_violated: authorization_details')).toBe(true);
    expect(refusedBeforePolicy('constraint_violated: amount max')).toBe(false);
    expect(refusedBeforePolicy('rule_denied: x')).toBe(false);
    expect(afterApproval({ reason: 'approval_denied: big' }, 'approval_required')).toBe('deny');
    expect(afterApproval({ reason: 'allowed: approved by ann' }, 'approval_required')).toBe('allow');
    expect(afterApproval({ reason: 'allowed: approved by ann' }, 'deny')).toBe('deny');
    expect(afterApproval({ reason: 'allowed' }, 'approval_required')).toBe('approval_required');
  });
});
