import { spawn, type ChildProcess } from 'node:child_process';
import { get as httpGet, request as httpRequest } from 'node:http';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { projectRoot } from '../../src/paths.js';
import { dropTestDatabase, testDatabase, testServerUrl } from './database.js';

export const ADMIN = 'cluster-admin-token-0123456789abcdef';

/**
 * `gatehouse serve` as `npm start` runs it: a primary and worker processes over one database
 * (the SQLite file in `dir`, or with GATEHOUSE_TEST_DATABASE_URL a PostgreSQL database of its own).
 */
export interface Cluster {
  base: string;
  stop(): Promise<number | null>;
}

/** Removes what a cluster on `dir` left behind (its PostgreSQL database; the caller removes the directory). */
export async function dropCluster(dir: string): Promise<void> {
  if (testServerUrl()) await dropTestDatabase(dir);
}

/** `env` adds variables to the processes' environment (NODE_EXTRA_CA_CERTS, NODE_ENV, ...). */
export async function startCluster(dir: string, workers = 2, env: Record<string, string> = {}): Promise<Cluster> {
  mkdirSync(join(dir, 'policies'), { recursive: true });
  const tsx = pathToFileURL(join(projectRoot, 'node_modules/tsx/dist/loader.mjs')).href;
  const child: ChildProcess = spawn(process.execPath, ['--import', tsx, join(projectRoot, 'src/cli.ts'), 'serve'], {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      PORT: '0',
      GATEHOUSE_DB: join(dir, 'gh.db'),
      GATEHOUSE_POLICY_DIR: join(dir, 'policies'),
      GATEHOUSE_ADMIN_TOKEN: ADMIN,
      GATEHOUSE_SECRET: 'cluster-secret-0123456789abcdef0123456789',
      GATEHOUSE_WORKERS: String(workers),
      ...(testServerUrl() ? { GATEHOUSE_DATABASE_URL: await testDatabase(dir) } : {}),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`workers did not start: ${stderr}`)), 60_000);
    let buf = '';
    let seen = 0;
    const ports = new Set<number>();
    child.stdout!.on('data', (b: Buffer) => {
      buf += b.toString();
      const lines = buf.split('\n');
      buf = lines.pop()!;
      for (const line of lines) {
        try {
          const j = JSON.parse(line);
          if (j.msg !== 'listening') continue;
          ports.add(j.port);
          if (++seen < workers) continue;
          clearTimeout(timer);
          // Every worker serves the one port (the primary hands connections out).
          if (ports.size === 1) resolve(j.port);
          else reject(new Error(`the workers listen on ${[...ports].join(', ')}`));
        } catch {
          /* not a log line */
        }
      }
    });
    child.once('exit', (code) => reject(new Error(`exited with ${code}: ${stderr}`)));
  });
  return {
    base: `http://localhost:${port}`,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve(child.exitCode);
        child.once('exit', (code) => resolve(code));
        child.kill('SIGTERM');
      }),
  };
}

/**
 * One request on a connection of its own (no keep-alive): the primary deals connections out
 * to the workers in turn, so consecutive calls land on different workers.
 */
export function freshCall(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const text = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, {
      method,
      agent: false,
      headers: { ...(text !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) } : {}), ...headers },
    }, (r) => {
      let out = '';
      r.setEncoding('utf8');
      r.on('data', (c: string) => (out += c));
      r.on('end', () => resolve({ status: r.statusCode ?? 0, body: out && /json/.test(r.headers['content-type'] ?? '') ? JSON.parse(out) : out }));
    });
    req.on('error', reject);
    req.end(text);
  });
}

/** The /metrics text, asked on a connection of its own. */
export function scrapeMetrics(base: string): Promise<string> {
  return new Promise((resolve, reject) => {
    httpGet(`${base}/metrics`, { agent: false, headers: { authorization: `Bearer ${ADMIN}` } }, (r) => {
      let text = '';
      r.setEncoding('utf8');
      r.on('data', (c: string) => (text += c));
      r.on('end', () => resolve(text));
    }).on('error', reject);
  });
}

export async function call(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

export const admin = (base: string, method: string, path: string, body?: unknown) =>
  call(base, method, `/admin/v1${path}`, body, { authorization: `Bearer ${ADMIN}` });

export interface Agent { id: string; key: CryptoKey }

export async function registerAgent(base: string, name: string, capabilities: { name: string; limits?: unknown }[], roles: string[]): Promise<Agent> {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const res = await admin(base, 'POST', '/agents', { name, mode: 'autonomous', public_jwk: await exportJWK(publicKey), roles, capabilities });
  if (res.status !== 201) throw new Error(`agent: ${res.status} ${JSON.stringify(res.body)}`);
  return { id: res.body.agent_id, key: privateKey };
}

/** An access token for an autonomous agent (client_credentials with a signed assertion). */
export async function accessToken(base: string, agent: Agent): Promise<string> {
  const t = Math.floor(Date.now() / 1000);
  const assertion = await new SignJWT({ iss: agent.id, sub: agent.id, aud: base, iat: t, exp: t + 60, jti: randomUUID() })
    .setProtectedHeader({ alg: 'EdDSA' })
    .sign(agent.key);
  const res = await fetch(`${base}/apis/regional/v1/ai/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: assertion,
    }),
  });
  const body = (await res.json()) as { access_token?: string };
  if (!body.access_token) throw new Error(`token: ${res.status} ${JSON.stringify(body)}`);
  return body.access_token;
}

export interface ActionRequest { action: string; resource: string; context: Record<string, unknown> }

export const bind = (base: string, token: string, a: ActionRequest) =>
  call(base, 'POST', '/apis/regional/v1/ai/auth/transaction-token', a, { authorization: `Bearer ${token}` });

export const decide = (base: string, agent: Agent, txnToken: string, a: ActionRequest) =>
  call(base, 'POST', '/apis/regional/v1/agents/authorize', { agent_id: agent.id, transaction_token: txnToken, ...a });
