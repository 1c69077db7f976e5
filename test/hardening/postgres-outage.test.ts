import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessToken, ADMIN, admin, bind, registerAgent, type Agent } from '../helpers/cluster.js';
import { listeningPort, serveProcess, stopRun, waitFor, type Run } from '../foundation/serve-process.js';
import { findInitdb, startThrowawayPostgres, type ThrowawayPostgres } from './throwaway-postgres.js';

// PostgreSQL stopped for five seconds under light load, then started again. What must hold: no
// answer is a 500 and none hangs, a refusal for want of the database is a 503 with Retry-After,
// /healthz says the database is unavailable, the server survives and serves again within five
// seconds of the database's return, and every decision answered 200 has its audit record.

const initdb = findInitdb();
const LOAD_LOOPS = 4;
const OUTAGE_MS = 5_000;
const RECOVERY_MS = 5_000;
const REQUEST_TIMEOUT_MS = 10_000;

interface Answer { at: number; status: number; retryAfter: string | null; resource: string; decision?: string; hung?: boolean }

async function post(url: string, body: unknown): Promise<{ status: number; retryAfter: string | null; json: any; hung?: boolean }> {
  try {
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    const text = await res.text();
    let json: any;
    try {
      json = JSON.parse(text);
    } catch {
      json = text;
    }
    return { status: res.status, retryAfter: res.headers.get('retry-after'), json };
  } catch (err) {
    const name = (err as Error).name;
    // A refused or reset connection is the server gone; a timeout is a hang.
    return { status: 0, retryAfter: null, json: null, hung: name === 'TimeoutError' || name === 'AbortError' };
  }
}

describe.skipIf(!initdb)('PostgreSQL goes away and comes back', () => {
  let cluster: ThrowawayPostgres;
  let run: Run | undefined;
  let dir: string;

  beforeAll(async () => {
    cluster = await startThrowawayPostgres(initdb!);
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-outage-'));
    mkdirSync(join(dir, 'policies'));
  });
  afterAll(async () => {
    if (run) await stopRun(run);
    cluster?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers 503 with Retry-After while it is gone, never a 500 or an unrecorded decision, and recovers within 5 s', { timeout: 120_000 }, async () => {
    run = serveProcess(dir, {
      GATEHOUSE_DATABASE_URL: cluster.url,
      GATEHOUSE_SECRET: 'outage-secret-0123456789abcdef0123456789',
      GATEHOUSE_ADMIN_TOKEN: ADMIN,
      GATEHOUSE_POLICY_DIR: join(dir, 'policies'),
      GATEHOUSE_WORKERS: '2',
    });
    const port = await waitFor(listeningPort(run), 60_000);
    const base = `http://localhost:${port}`;
    // Set-up, before the outage: both workers listening and the database answering. On a machine
    // busy with other tests a first connection can outlast the pool's wait, which is a 503 the
    // caller is asked to retry; the set-up does, a few times, as such a caller would.
    const r = run;
    await waitFor(() => (r.stdout.filter((l) => l.includes('"msg":"listening"')).length >= 2 ? true : undefined), 60_000);
    let put = await admin(base, 'PUT', '/roles/reader', { permissions: ['read:docs'] });
    for (let retry = 0; put.status === 503 && retry < 5; retry++) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      put = await admin(base, 'PUT', '/roles/reader', { permissions: ['read:docs'] });
    }
    expect(put.status, `set-up: ${JSON.stringify(put.body)}\n${run.lines.slice(-20).join('\n')}`).toBeLessThan(300);
    const agent: Agent = await registerAgent(base, 'outage-agent', [{ name: 'read:docs' }], ['reader']);
    const allowed = { action: 'read:docs', resource: 'doc:allowed', context: {} };
    const bound = await bind(base, await accessToken(base, agent), allowed);
    expect(bound.status).toBe(200);
    const txnToken = bound.body.data.transaction_token as string;

    const answers: Answer[] = [];
    const health: { at: number; status: number; body: any }[] = [];
    let stopLoad = false;
    let counter = 0;
    const decisionUrl = `${base}/apis/regional/v1/agents/authorize`;
    const loop = async () => {
      while (!stopLoad) {
        const n = ++counter;
        // Every other request is an allow (on the bound token); the rest are denials with a resource of their own.
        const request = n % 2 ? { agent_id: agent.id, transaction_token: txnToken, ...allowed } : { agent_id: agent.id, action: 'read:docs', resource: `doc:${n}`, context: {} };
        const at = Date.now();
        const r = await post(decisionUrl, request);
        answers.push({ at, status: r.status, retryAfter: r.retryAfter, resource: request.resource, decision: r.json?.data?.decision, hung: r.hung });
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const healthLoop = async () => {
      while (!stopLoad) {
        const at = Date.now();
        try {
          const res = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
          health.push({ at, status: res.status, body: await res.json() });
        } catch {
          health.push({ at, status: 0, body: null });
        }
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    };
    const loops = [...Array.from({ length: LOAD_LOOPS }, loop), healthLoop()];

    await new Promise((r) => setTimeout(r, 1500));
    const stoppedAt = Date.now();
    cluster.stop();
    await new Promise((r) => setTimeout(r, OUTAGE_MS));
    cluster.start();
    const backAt = Date.now();
    // Service again: an answer of 200 asked after the database's return.
    await waitFor(() => (answers.some((a) => a.at >= backAt && a.status === 200) ? true : undefined), 30_000).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 1500));
    stopLoad = true;
    await Promise.all(loops);

    const firstOk = answers.filter((a) => a.at >= backAt && a.status === 200).sort((a, b) => a.at - b.at)[0];
    const statuses = [...new Set(answers.map((a) => a.status))].sort();
    const during = answers.filter((a) => a.at > stoppedAt + 500 && a.at < backAt);

    expect(answers.filter((a) => a.hung), 'requests that hung').toEqual([]);
    expect(answers.filter((a) => a.status === 0), 'connections refused or reset').toEqual([]);
    expect(statuses.filter((s) => s !== 200 && s !== 503), `statuses seen: ${statuses.join(', ')}`).toEqual([]);
    expect(answers.filter((a) => a.status === 503 && !a.retryAfter), '503s without Retry-After').toEqual([]);
    expect(during.filter((a) => a.status === 503).length, 'refusals while the database was gone').toBeGreaterThan(0);
    expect(health.some((h) => h.at > stoppedAt + 500 && h.at < backAt && h.status === 503 && h.body?.database === 'unavailable'), '/healthz during the outage').toBe(true);
    expect(firstOk, 'a decision answered after the database came back').toBeDefined();
    expect(firstOk!.at - backAt, 'time to recover (ms)').toBeLessThanOrEqual(RECOVERY_MS);
    expect(run.child.exitCode, 'the server is still running').toBeNull();
    expect((await fetch(`${base}/healthz`)).status).toBe(200);

    // Every decision answered 200 has its record.
    const db = new pg.Client({ connectionString: cluster.url });
    await db.connect();
    try {
      const rows = (await db.query<{ resource: string; n: string }>("SELECT resource, count(*) AS n FROM audit_log WHERE agent_id = $1 AND kind = 'decision' GROUP BY resource", [agent.id])).rows;
      const recorded = new Map(rows.map((r) => [r.resource, Number(r.n)]));
      const answered = new Map<string, number>();
      for (const a of answers) if (a.status === 200) answered.set(a.resource, (answered.get(a.resource) ?? 0) + 1);
      const missing = [...answered].filter(([resource, n]) => (recorded.get(resource) ?? 0) < n);
      expect(missing, 'decisions answered without their audit record').toEqual([]);
      expect(answers.filter((a) => a.status === 200 && a.resource === 'doc:allowed' && a.decision !== 'allow')).toEqual([]);
    } finally {
      await db.end();
    }
  });
});
