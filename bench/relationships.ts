/**
 * Relationships (on demand: `npm run bench:relationships [-- apps|graph|all]`).
 *
 * apps   The applications of the OOPSLA 2024 Cedar paper (Google Drive, GitHub, TinyTodo), from
 *        a copy of its benchmark folder (its `benches/` and `generators/`, found where the test
 *        helpers find the peer material, test/helpers/peers.ts): each
 *        OpenFGA model imported by `gatehouse policy import openfga`'s own functions, each Cedar
 *        policy set run in @cedar-policy/cedar-wasm, both on the same generated entity graphs of
 *        5 to 50 entities (bench/oopsla.ts draws them, seeded; the graph written once as Cedar
 *        entities and once as relationships). Requests are random (principal, action,
 *        resource) per graph, as the paper's; every decision of Cedar and of Gatehouse must
 *        agree (a disagreement is printed: it is a bug in the translation or in us); then each
 *        is timed, per decision, median and p99. Gatehouse's decision here is the compiled
 *        checker's answer for the relation the action names, over an index of the graph;
 *        Cedar's is `statefulIsAuthorized` with the preparsed policies and the graph's
 *        entities (cedar-wasm takes the entities with each call: that is its API).
 *        BENCH_HIERARCHIES graphs per size (default 20), BENCH_REQUESTS per graph (default 100),
 *        BENCH_CONNECTION the probability of each possible edge (default 0.2), BENCH_SIZES.
 *
 * graph  A folder tree ten deep and 1,000,000 relationships (bench/relations.ts's `folderTree`,
 *        with 100,000 documents) loaded through the store in one transaction, then a server
 *        (`node dist/cli.js serve`, as many workers as cores) on that database:
 *          - decisions at the decision endpoint with transaction tokens (autocannon, 50
 *            connections): `viewer:documents` on a document ten folders below the root,
 *            granted through the agent's group, against a flat attribute decision
 *            (`create:refunds` through a role, with amount and currency limits) by the same
 *            agent, alternating, in the same run; each round's two runs compared;
 *          - list-objects through the management API for a person who may read exactly
 *            1,000 of the 100,000 documents (through shared folders and direct shares);
 *          - the server's memory (resident set of each process) and, in this process, the
 *            in-memory index's heap and its warm check median over the same graph.
 *        With GATEHOUSE_BENCH_DATABASE_URL (a PostgreSQL server URL whose user may create
 *        databases) the same on a fresh database there with three instances; without it that
 *        part is skipped with a message. BENCH_STORES (default `sqlite,postgres`) picks the
 *        servers; BENCH_RELATIONSHIPS, BENCH_SECONDS, BENCH_ROUNDS, BENCH_LIST_CALLS.
 */
import { execSync, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import pg from 'pg';
import { importOpenfga } from '../src/policy/openfga/index.js';
import { parsePolicy } from '../src/policy/parser.js';
import { buildModel } from '../src/policy/relations/model.js';
import { MemoryIndex } from '../src/policy/relations/index.js';
import { RelationChecker } from '../src/policy/relations/checker.js';
import { parseRelationshipText } from '../src/policy/relations/tuple.js';
import { migrate, openDatabase } from '../src/store/db.js';
import { openStore } from '../src/store/index.js';
import type { Relationship } from '../src/store/relationships.js';
import { adminClient, autocannon, startGatehouse, stop, waitReady, type CannonResult } from './harness.js';
import { OOPSLA } from '../test/helpers/peers.js';
import { APPS, rng, type AppName, type AppRequest } from './oopsla.js';
import { folderTree, MODEL } from './relations.js';

const MODE = process.argv[2] ?? process.env.BENCH_MODE ?? 'all';
if (!['apps', 'graph', 'all'].includes(MODE)) throw new Error(`unknown part ${MODE} (apps, graph or all)`);

const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]!; };
const quantile = (xs: number[], q: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * q))]!; };
const us = (ns: number) => (ns / 1000).toFixed(ns < 10_000 ? 2 : 1);
const table = (head: string[], rows: string[][]) => {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => '| ' + cells.map((c, i) => c.padStart(widths[i]!)).join(' | ') + ' |';
  return [line(head), '|' + widths.map((w) => '-'.repeat(w + 1) + ':').join('|') + '|', ...rows.map(line)].join('\n');
};

// ---- apps: the OOPSLA 2024 applications, Gatehouse against cedar-wasm --------------------------

const CEDAR_FILES: Record<AppName, [string, string]> = {
  gdrive: ['policies.cedar', 'gdrive.cedarschema.json'],
  github: ['policies.cedar', 'github.cedarschema.json'],
  tinytodo: ['tinytodo.cedar', 'tinytodo.cedarschema.json'],
};

/** Nanoseconds per call of `fn`, repeated `times` (a sub-microsecond call is below the clock's grain). */
function timeEach(fn: () => unknown, times: number): number {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < times; i++) fn();
  return Number(process.hrtime.bigint() - t0) / times;
}

function benchApps(): void {
  if (!OOPSLA || !existsSync(OOPSLA)) {
    console.log('apps: skipped: no copy of the OOPSLA 2024 benchmarks was found (see test/helpers/peers.ts)');
    return;
  }
  const sizes = (process.env.BENCH_SIZES ?? '5,10,15,20,30,40,50').split(',').map(Number);
  const hierarchies = Number(process.env.BENCH_HIERARCHIES ?? 20);
  const perGraph = Number(process.env.BENCH_REQUESTS ?? 100);
  const p = Number(process.env.BENCH_CONNECTION ?? 0.2);
  const apps = (process.env.BENCH_APPS ?? 'gdrive,github,tinytodo').split(',') as AppName[];
  console.log(`node ${process.version}, cedar-wasm ${cedar.getCedarVersion()}; ${hierarchies} graphs × ${perGraph} requests per size, edge probability ${p}`);
  let disagreements = 0;
  let worst = Infinity;
  for (const app of apps) {
    const read = (f: string) => { try { return { text: readFileSync(f, 'utf8') }; } catch (e) { return { error: String(e) }; } };
    const imported = importOpenfga(join(OOPSLA, app, 'openfga', 'authorization-model.dsl'), read);
    if (!imported.ok) throw new Error(`${app}: the import refused the model: ${JSON.stringify(imported.refusals)}`);
    const parsed = parsePolicy(`${app}.policy`, imported.value.policy);
    if (!parsed.file) throw new Error(`${app}: the imported policy does not parse: ${JSON.stringify(parsed.diagnostics)}`);
    const model = buildModel([parsed.file]);
    const policySetId = `oopsla-${app}`;
    const [policyFile, schemaFile] = CEDAR_FILES[app];
    const prepared = cedar.preparsePolicySet(policySetId, { staticPolicies: readFileSync(join(OOPSLA, app, 'cedar', policyFile), 'utf8') });
    if (prepared.type !== 'success') throw new Error(`${app}: cedar: ${JSON.stringify(prepared)}`);
    // With the schema, Cedar knows the actions' hierarchy (GitHub's read is in triage, in write, ...)
    // and checks each request's types, as the paper's harness runs it.
    const schema = cedar.preparseSchema(policySetId, JSON.parse(readFileSync(join(OOPSLA, app, 'cedar', schemaFile), 'utf8')));
    if (schema.type !== 'success') throw new Error(`${app}: cedar schema: ${JSON.stringify(schema)}`);

    // The checker's code warmed once on a large graph, so the first sizes do not pay for the JIT.
    {
      const g = APPS[app](50, p, rng(1));
      const index = new MemoryIndex();
      for (const t of g.tuples) index.add(parseRelationshipText(t) as Parameters<MemoryIndex['add']>[0]);
      const checker = new RelationChecker(model, index);
      const qs = g.requests(500, rng(2));
      for (let w = 0; w < 20; w++) for (const q of qs) checker.check(q.object, q.relation, q.subject);
    }
    const rows: string[][] = [];
    for (const n of sizes) {
      const ours: number[] = [], theirs: number[] = [];
      let allowed = 0, asked = 0, tuples = 0;
      for (let h = 0; h < hierarchies; h++) {
        const graph = APPS[app](n, p, rng(n * 1_000 + h));
        tuples += graph.tuples.length;
        const index = new MemoryIndex();
        for (const t of graph.tuples) {
          const r = parseRelationshipText(t);
          if (typeof r === 'string') throw new Error(`${app}: ${t}: ${r}`);
          index.add(r);
        }
        const checker = new RelationChecker(model, index);
        const requests = graph.requests(perGraph, rng(n * 7_919 + h));
        const cedarCall = (q: AppRequest) => ({ principal: q.principal, action: q.action, resource: q.resource, context: {}, preparsedPolicySetId: policySetId, preparsedSchemaName: policySetId, validateRequest: true, entities: graph.entities });
        const cedarDecides = (q: AppRequest): boolean => {
          const a = cedar.statefulIsAuthorized(cedarCall(q) as never);
          if (a.type !== 'success') throw new Error(`${app}: cedar failed: ${JSON.stringify(a).slice(0, 500)}`);
          if (a.response.diagnostics.errors.length) throw new Error(`${app}: cedar errors: ${JSON.stringify(a.response.diagnostics.errors).slice(0, 500)}`);
          return a.response.decision === 'allow';
        };
        const ourDecision = (q: AppRequest): boolean => {
          const r = checker.check(q.object, q.relation, q.subject);
          if ('error' in r) throw new Error(`${app}: ${q.subject} ${q.relation} ${q.object}: ${r.error.message}`);
          return r.allowed;
        };
        for (const q of requests) {
          const [c, g] = [cedarDecides(q), ourDecision(q)];
          asked++;
          if (c) allowed++;
          if (c !== g) {
            disagreements++;
            if (disagreements <= 20) console.log(`DISAGREE ${app} n=${n} graph ${h}: ${q.principal.id} ${q.action.id} ${q.resource.type}::${q.resource.id}: cedar ${c}, gatehouse ${g} (${q.subject} ${q.relation} ${q.object})`);
          }
        }
        // Each request on its own, warm; one engine after the other, so that neither's garbage
        // is collected in the other's time. Cedar's calls are long enough to time one by one.
        for (let w = 0; w < 20; w++) for (const q of requests) ourDecision(q);
        for (const q of requests) ours.push(timeEach(() => checker.check(q.object, q.relation, q.subject), 50));
        for (const q of requests.slice(0, 10)) cedarDecides(q);
        for (const q of requests) {
          const call = cedarCall(q);
          theirs.push(timeEach(() => cedar.statefulIsAuthorized(call as never), 1));
        }
      }
      const speedUp = median(theirs) / median(ours);
      worst = Math.min(worst, speedUp);
      rows.push([String(n), String(Math.round(tuples / hierarchies)), `${Math.round((allowed / asked) * 100)}%`, us(median(ours)), us(quantile(ours, 0.99)), us(median(theirs)), us(quantile(theirs, 0.99)), `${Math.round(speedUp)}×`]);
    }
    console.log(`\n${app} (${hierarchies} graphs × ${perGraph} requests per size)\n` + table(['entities', 'relationships', 'allowed', 'gatehouse median µs', 'gatehouse p99 µs', 'cedar-wasm median µs', 'cedar-wasm p99 µs', 'speed-up (medians)'], rows));
  }
  console.log(`\ndecisions that disagree: ${disagreements}`);
  console.log(`smallest speed-up: ${Math.round(worst)}× (target ≥ 100× at every size: ${worst >= 100 ? 'met' : 'NOT met'})`);
  if (disagreements) process.exitCode = 1;
}

// ---- graph: 1,000,000 relationships behind a server ----------------------------------------------

const ADMIN = 'bench-admin-token-0123456789abcdef';
const SECRET = 'bench-secret-0123456789abcdef-0123456789';
const TARGET = Number(process.env.BENCH_RELATIONSHIPS ?? 1_000_000);
const DOCUMENTS = Number(process.env.BENCH_DOCUMENTS ?? 100_000);
const READABLE = 1_000;
const LIST_CALLS = Number(process.env.BENCH_LIST_CALLS ?? 300);

/** The list-objects client (run as a process of its own): one call at a time, milliseconds each, as JSON. */
const LIST_CLIENT = `
const bases = process.env.LIST_BASES.split(','), calls = Number(process.env.LIST_CALLS), expect = Number(process.env.LIST_EXPECT);
const once = async (at) => {
  const t = process.hrtime.bigint();
  const res = await fetch(at + '/admin/v1/relationships/list-objects', { method: 'POST', headers: { authorization: 'Bearer ' + process.env.LIST_TOKEN, 'content-type': 'application/json' }, body: JSON.stringify({ subject: 'user:reader', relation: 'viewer', type: 'document' }) });
  const body = await res.json();
  const ms = Number(process.hrtime.bigint() - t) / 1e6;
  if (!body.objects || body.objects.length !== expect) throw new Error('list-objects: ' + res.status + ' ' + JSON.stringify(body).slice(0, 300));
  return ms;
};
const firstLists = [];
for (const b of bases) firstLists.push(await once(b));
for (const b of bases) for (let i = 0; i < 20; i++) await once(b);
const listTimes = [];
for (let i = 0; i < calls; i++) listTimes.push(await once(bases[i % bases.length]));
process.stdout.write(JSON.stringify({ firstLists, listTimes }));
`;
const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const POLICY = `policy "bench-relationships" version 1\n\n${MODEL}`;

/**
 * The bench's graph: the folder tree, and `user:reader`, who may read exactly READABLE documents:
 * the leaf folders shared with them (each holds one or two documents) until one more would be too
 * many, then direct shares on documents of other leaves.
 */
function benchGraph(): { relationships: Relationship[]; documents: number } {
  const relationships: Relationship[] = [];
  const shape = folderTree((object, relation, subject) => relationships.push({ object, relation, subject }), TARGET - READABLE, DOCUMENTS);
  const perLeaf = new Map<string, number[]>();
  for (let i = 0; i < shape.documents; i++) {
    const leaf = shape.leaves[i % shape.leaves.length]!;
    (perLeaf.get(leaf) ?? perLeaf.set(leaf, []).get(leaf)!).push(i);
  }
  let readable = 0;
  const leaves = [...perLeaf.entries()];
  let k = 0;
  for (; k < leaves.length && readable + leaves[k]![1].length <= READABLE - 50; k += 7) {
    relationships.push({ object: leaves[k]![0], relation: 'viewer', subject: 'user:reader' });
    readable += leaves[k]![1].length;
  }
  for (let j = 1; readable < READABLE; j += 7) {
    relationships.push({ object: `document:d${leaves[j]![1][0]}`, relation: 'viewer', subject: 'user:reader' });
    readable++;
  }
  return { relationships, documents: shape.documents };
}

const rssOf = (pid: number): number => {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
  } catch {
    return 0;
  }
};
/** A process and every process below it (the cluster's workers). */
const treeOf = (pid: number): number[] => {
  const kids = readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number).filter((c) => {
    try { return readFileSync(`/proc/${c}/stat`, 'utf8').split(') ')[1]!.split(' ')[1] === String(pid); } catch { return false; }
  });
  return [pid, ...kids.flatMap(treeOf)];
};
const mb = (n: number) => `${Math.round(n / 1024 / 1024)} MB`;

interface GraphResult { label: string; rows: string[][]; notes: string[] }

/** Rows per statement of the PostgreSQL loader (nine arrays of this length each). */
const BULK_ROWS = 20_000;

/**
 * Loads the graph into a fresh database, in one transaction: on SQLite through the store (its
 * writes are in-process calls), on PostgreSQL as rows of arrays (`unnest`), BULK_ROWS per
 * statement, since the store's write path takes three round trips per relationship (look,
 * write, log), hours for a million. A server reads every stored relationship when it starts,
 * so the bulk rows need no change-log entries.
 */
async function load(dbFile: string, url: string | undefined, relationships: Relationship[]): Promise<{ ms: number; how: string }> {
  const db = await openDatabase({ file: dbFile, ...(url ? { url } : {}) });
  await migrate(db);
  const store = await openStore(db);
  const t0 = Date.now();
  if (!url) {
    await store.relationships.apply(relationships, []);
    await store.close();
    return { ms: Date.now() - t0, how: 'through the store in one transaction' };
  }
  await store.close();
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query('BEGIN');
    const at = Math.floor(Date.now() / 1000);
    for (let i = 0; i < relationships.length; i += BULK_ROWS) {
      const cols: string[][] = Array.from({ length: 8 }, () => []);
      for (const r of relationships.slice(i, i + BULK_ROWS)) {
        const c0 = r.object.indexOf(':'), h = r.subject.indexOf('#'), sc = r.subject.indexOf(':');
        cols[0]!.push(r.object.slice(0, c0)); cols[1]!.push(r.object.slice(c0 + 1)); cols[2]!.push(r.relation);
        cols[3]!.push(r.subject.slice(0, sc)); cols[4]!.push(r.subject.slice(sc + 1, h < 0 ? undefined : h)); cols[5]!.push(h < 0 ? '' : r.subject.slice(h + 1));
        cols[6]!.push(r.condition?.name ?? (null as unknown as string)); cols[7]!.push(r.condition ? JSON.stringify(r.condition.context ?? {}) : (null as unknown as string));
      }
      await c.query(
        `INSERT INTO relationships (object_type, object_id, relation, subject_type, subject_id, subject_relation, condition_name, condition_context, created_at)
         SELECT *, $9::integer FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])`,
        [...cols, at],
      );
    }
    await c.query('COMMIT');
  } finally {
    await c.end();
  }
  return { ms: Date.now() - t0, how: `as rows of arrays, ${BULK_ROWS.toLocaleString('en-US')} per statement, in one transaction` };
}

async function benchServer(label: string, opts: { instances: number; url?: string }, relationships: Relationship[]): Promise<GraphResult> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-rel-'));
  mkdirSync(join(dir, 'policies'));
  writeFileSync(join(dir, 'policies', 'bench.policy'), POLICY);
  const notes: string[] = [];
  const children: ChildProcess[] = [];
  try {
    const loaded = await load(join(dir, 'bench.db'), opts.url, relationships);
    notes.push(`${label}: ${relationships.length.toLocaleString('en-US')} relationships written ${loaded.how} in ${(loaded.ms / 1000).toFixed(1)} s`);
    const workers = opts.instances > 1 ? 1 : availableParallelism();
    const bases: string[] = [];
    let issuer: string | undefined;
    const started = Date.now();
    for (let i = 0; i < opts.instances; i++) {
      const env: Record<string, string> = { GATEHOUSE_ADMIN_TOKEN: ADMIN, GATEHOUSE_SECRET: SECRET, GATEHOUSE_WORKERS: String(workers), GATEHOUSE_DATABASE_URL: opts.url ?? '' };
      if (issuer) env.GATEHOUSE_ISSUER = issuer;
      const s = await startGatehouse(dir, env);
      issuer ??= s.base;
      children.push(s.child);
      bases.push(s.base);
      // A server loads every relationship before it answers: a million take a while.
      await waitReady(`${s.base}/healthz`, 900);
    }
    const base = bases[0]!;
    const admin = adminClient(base, ADMIN);

    const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    await admin('PUT', '/roles/refunder', { permissions: ['create:refunds'] });
    const agent = (await admin('POST', '/agents', {
      name: 'bench', mode: 'autonomous', public_jwk: await exportJWK(publicKey), roles: ['refunder'],
      capabilities: [{ name: 'create:refunds', limits: { amount: { max: 500 }, currency: { in: ['USD', 'EUR'] } } }, { name: 'viewer:documents' }],
    })) as { agent_id: string };
    // The agent joins the root's viewer group through the management API, like any change.
    await admin('POST', '/relationships', { writes: [{ object: 'group:g0', relation: 'member', subject: `agent:${agent.agent_id}` }] });
    // The first decision through the graph waits for the index (its first load): time it.
    const t = Math.floor(Date.now() / 1000);
    const assertion = await new SignJWT({ iss: agent.agent_id, sub: agent.agent_id, aud: issuer, iat: t, exp: t + 300, jti: randomUUID() }).setProtectedHeader({ alg: 'EdDSA' }).sign(privateKey);
    const tokenRes = await fetch(`${base}/apis/regional/v1/ai/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: assertion }),
    });
    const bearer = { authorization: `Bearer ${((await tokenRes.json()) as { access_token: string }).access_token}`, 'content-type': 'application/json' };
    const flat = (i: number) => ({ action: 'create:refunds', resource: `refund:${i}`, context: { amount: 100 + (i % 300), currency: 'USD' } });
    // Documents spread over the whole tree: each ten folders below the root.
    const through = (i: number) => ({ action: 'viewer:documents', resource: `document:d${(i * 9973) % DOCUMENTS}` });
    const bind = (make: (i: number) => object, n: number) =>
      Promise.all(Array.from({ length: n }, async (_, i) => {
        const a = make(i);
        const r = await fetch(`${bases[i % bases.length]}/apis/regional/v1/ai/auth/transaction-token`, { method: 'POST', headers: bearer, body: JSON.stringify(a) });
        const body = (await r.json()) as { data?: { transaction_token: string } };
        if (!body.data) throw new Error(`transaction token: ${JSON.stringify(body)}`);
        return JSON.stringify({ agent_id: agent.agent_id, transaction_token: body.data.transaction_token, ...a });
      }));
    const decide = async (body: string, at = base) => (await (await fetch(`${at}/apis/regional/v1/agents/authorize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).json()) as { data?: { decision?: string; reason?: string } };
    const firstBodies = await bind(through, 1);
    const t0 = Date.now();
    for (;;) {
      const d = await decide(firstBodies[0]!);
      if (d.data?.decision === 'allow') break;
      if (Date.now() - t0 > 120_000) throw new Error(`the agent is not granted through the graph: ${JSON.stringify(d)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    notes.push(`${label}: servers started in ${((t0 - started) / 1000).toFixed(1)} s; first decision through the graph answered ${((Date.now() - t0) / 1000).toFixed(1)} s later (the index loaded)`);
    // Every instance (and worker) holds the graph before the runs: a few decisions each.
    for (const b of bases) for (let i = 0; i < 4 * workers; i++) {
      const d = await decide(firstBodies[0]!, b);
      if (d.data?.decision !== 'allow') throw new Error(`${b}: ${JSON.stringify(d)}`);
    }

    const run = (url: string, connections: number, bodies: string[]) => {
      let next = 0;
      return autocannon({ url, connections, duration: DURATION, headers: { 'content-type': 'application/json' }, requests: [{ method: 'POST', path: '/apis/regional/v1/agents/authorize', setupRequest: (req: object) => ({ ...req, body: bodies[next++ % bodies.length] }) }] });
    };
    // Autocannon speaks to one address: with several instances, one autocannon each, at once.
    const runAll = async (bodies: string[]): Promise<CannonResult> => {
      if (bases.length === 1) return run(base, 50, bodies);
      const results = await Promise.all(bases.map((b) => run(b, Math.ceil(50 / bases.length), bodies)));
      return {
        requests: { average: results.reduce((s, r) => s + r.requests.average, 0), total: results.reduce((s, r) => s + r.requests.total, 0) },
        latency: { p50: Math.max(...results.map((r) => r.latency.p50)), p99: Math.max(...results.map((r) => r.latency.p99)) },
        non2xx: results.reduce((s, r) => s + r.non2xx, 0),
        errors: results.reduce((s, r) => s + r.errors, 0),
      };
    };
    const flatRuns: CannonResult[] = [], graphRuns: CannonResult[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Transaction tokens live 60 s: each round binds its own.
      const [flatBodies, graphBodies] = [await bind(flat, 64), await bind(through, 64)];
      for (const [bodies, what] of [[flatBodies, 'flat'], [graphBodies, 'graph']] as const) {
        const d = await decide(bodies[0]!);
        if (d.data?.decision !== 'allow') throw new Error(`${what}: expected allow, got ${JSON.stringify(d)}`);
      }
      flatRuns.push(await runAll(flatBodies));
      graphRuns.push(await runAll(graphBodies));
      process.stderr.write(`  ${label} round ${round + 1}: flat ${Math.round(flatRuns.at(-1)!.requests.average)}/s, through the graph ${Math.round(graphRuns.at(-1)!.requests.average)}/s\n`);
    }
    const ratios = graphRuns.map((g, i) => g.requests.average / flatRuns[i]!.requests.average);
    const ratio = median(ratios);
    const pick = (runs: CannonResult[]) => [...runs].sort((a, b) => a.requests.average - b.requests.average)[runs.length >> 1]!;
    const [f, g] = [pick(flatRuns), pick(graphRuns)];
    const rows: string[][] = [
      [label, 'authorize, flat attribute decision', `${Math.round(f.requests.average)}/s`, `p50 ${f.latency.p50} ms, p99 ${f.latency.p99} ms`, `${f.non2xx + f.errors} non-2xx/errors`],
      [label, 'authorize, viewer:documents 10 folders deep', `${Math.round(g.requests.average)}/s`, `p50 ${g.latency.p50} ms, p99 ${g.latency.p99} ms`, `${g.non2xx + g.errors} non-2xx/errors`],
      [label, 'through the graph / flat, per round', ratios.map((r) => `${Math.round(r * 100)}%`).join(', '), `median ${Math.round(ratio * 100)}%`, `target ≥ 70%: ${ratio >= 0.7 ? 'met' : 'NOT met'}`],
    ];

    // List-objects for the person who may read READABLE documents, timed by a client process of
    // its own (this one holds the whole graph, and its collections would be timed too): the
    // first call on each instance (which reads the model for reverse expansion and compiles the
    // code) on its own, 20 more each unrecorded, then LIST_CALLS spread over the instances.
    const client = spawnSync(process.execPath, ['--input-type=module', '-e', LIST_CLIENT], {
      env: { ...process.env, LIST_BASES: bases.join(','), LIST_TOKEN: ADMIN, LIST_CALLS: String(LIST_CALLS), LIST_EXPECT: String(READABLE) },
      encoding: 'utf8', maxBuffer: 1 << 24,
    });
    if (client.status !== 0) throw new Error(`list-objects client: ${client.stderr}`);
    const { firstLists, listTimes } = JSON.parse(client.stdout) as { firstLists: number[]; listTimes: number[] };
    const p99 = quantile(listTimes, 0.99);
    rows.push([label, `list-objects through the API (${READABLE} of ${DOCUMENTS.toLocaleString('en-US')} documents), ${LIST_CALLS} calls`, `median ${median(listTimes).toFixed(1)} ms`, `p99 ${p99.toFixed(1)} ms; max ${Math.max(...listTimes).toFixed(1)} ms; first call ${firstLists.map((x) => x.toFixed(0)).join(', ')} ms`, `target p99 < 50 ms: ${p99 < 50 ? 'met' : 'NOT met'}`]);
    const rss = children.map((c) => treeOf(c.pid!).map((pid) => ({ pid, rss: rssOf(pid) })));
    rows.push([label, 'server memory (resident)', rss.map((procs) => procs.map((x) => mb(x.rss)).join(' + ')).join('; '), `${opts.instances} instance(s), ${workers} worker(s) each (primary + workers)`, '']);
    return { label, rows, notes };
  } finally {
    for (const c of children) stop(c);
    await new Promise((r) => setTimeout(r, 500));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The index in this process: its heap, and warm check times ten folders deep. */
function inProcess(relationships: Relationship[], documents: number): string[][] {
  const gc = (globalThis as { gc?: () => void }).gc;
  const heap = () => { gc?.(); gc?.(); return process.memoryUsage().heapUsed; };
  const model = buildModel([parsePolicy('bench.policy', POLICY).file!]);
  const before = heap();
  const index = new MemoryIndex();
  for (const r of relationships) index.add(r);
  index.add({ object: 'group:g0', relation: 'member', subject: 'agent:bench' });
  const after = heap();
  const checker = new RelationChecker(model, index);
  const asks = Array.from({ length: 2000 }, (_, i) => `document:d${(i * 9973) % documents}`);
  for (const d of asks) if (!checker.holds(d, 'viewer', 'agent:bench')) throw new Error(`${d} should be visible to the agent`);
  for (let w = 0; w < 5; w++) for (const d of asks) checker.check(d, 'viewer', 'agent:bench');
  const times: number[] = [];
  for (let r = 0; r < 5; r++) for (const d of asks) times.push(timeEach(() => checker.check(d, 'viewer', 'agent:bench'), 1));
  const listMs: number[] = [];
  let listed = 0;
  for (let i = 0; i < 30; i++) {
    const t0 = process.hrtime.bigint();
    const r = checker.listObjects('user:reader', 'viewer', 'document');
    listMs.push(Number(process.hrtime.bigint() - t0) / 1e6);
    if ('error' in r && r.error) throw new Error(r.error.message);
    listed = r.objects.length;
  }
  const m = median(times);
  return [
    ['in process', 'index heap', gc ? mb(after - before) : 'run with --expose-gc', `${Math.round((after - before) / index.size)} bytes per relationship`, ''],
    ['in process', 'check, 10 folders deep, warm', `median ${us(m)} µs`, `p99 ${us(quantile(times, 0.99))} µs`, `target median < 10 µs: ${m < 10_000 ? 'met' : 'NOT met'}`],
    ['in process', `list-objects (${listed} objects), first call then 29 more`, `first ${listMs[0]!.toFixed(1)} ms, median ${median(listMs.slice(1)).toFixed(1)} ms`, `max ${Math.max(...listMs.slice(1)).toFixed(1)} ms`, ''],
  ];
}

/** The server part on a fresh database of GATEHOUSE_BENCH_DATABASE_URL's server, with three instances (skipped without it). */
async function benchPostgres(relationships: Relationship[]): Promise<GraphResult> {
  const serverUrl = process.env.GATEHOUSE_BENCH_DATABASE_URL;
  if (!serverUrl) return { label: 'PostgreSQL ×3', rows: [['PostgreSQL ×3', 'skipped', 'set GATEHOUSE_BENCH_DATABASE_URL to a server URL whose user may create databases', '', '']], notes: [] };
  const name = `gh_bench_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const c = new pg.Client({ connectionString: serverUrl });
  await c.connect();
  await c.query(`CREATE DATABASE ${name}`);
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  try {
    return await benchServer('PostgreSQL ×3', { instances: 3, url: u.toString() }, relationships);
  } finally {
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    await c.end();
  }
}

async function benchGraphs(): Promise<void> {
  process.stderr.write('building...\n');
  execSync('npm run build --silent', { stdio: 'inherit' });
  const { relationships, documents } = benchGraph();
  console.log(`\ngraph: ${relationships.length.toLocaleString('en-US')} relationships, a folder tree ten deep, ${documents.toLocaleString('en-US')} documents; ${availableParallelism()} cores, shared with other work`);
  const rows = inProcess(relationships, documents);
  const stores = (process.env.BENCH_STORES ?? 'sqlite,postgres').split(',');
  const results = stores.includes('sqlite') ? [await benchServer('SQLite', { instances: 1 }, relationships)] : [];
  if (stores.includes('postgres')) results.push(await benchPostgres(relationships));
  for (const r of results) rows.push(...r.rows);
  console.log(results.flatMap((r) => r.notes).join('\n'));
  console.log('\n' + table(['where', 'what', 'figure', '', 'target'], rows));
}

async function main(): Promise<void> {
  if (MODE === 'apps' || MODE === 'all') benchApps();
  if (MODE === 'graph' || MODE === 'all') await benchGraphs();
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
