/**
 * What a DPoP proof adds to a token, as CPU time (on demand: `npx tsx bench/dpop-cost.ts`).
 *
 * Throughput on a shared machine moves with whatever else runs there; CPU time per token moves
 * much less. This starts a server in this process (SQLite, or PostgreSQL with
 * GATEHOUSE_TEST_DATABASE_URL), registers an m2m application and asks `tokenResponse` (the token
 * endpoint's core, as the HTTP edge calls it) for client_credentials tokens, 10 at a time:
 * bearer ones, then DPoP-bound ones with a fresh ES256 proof each (made beforehand), in
 * alternating rounds. CPU time is the whole process's (signing runs on libuv's threads), so it
 * holds the token's signature, the proof's verification and its single-use record; it leaves out
 * HTTP and the load generator, which add the same to both.
 */
import { generateKeyPairSync, randomUUID, sign } from 'node:crypto';
import { tokenResponse } from '../src/oauth/token.js';
import { startTestServer } from '../test/helpers/server.js';

const TOKENS = Number(process.env.BENCH_TOKENS ?? 4000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const AT_ONCE = 10;

const server = await startTestServer();
const app = (await server.admin('POST', '/applications', { name: 'bench', type: 'm2m' })).body as { client_id: string; client_secret: string };
const authorization = `Basic ${Buffer.from(`${app.client_id}:${app.client_secret}`).toString('base64')}`;

const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const { kty, crv, x, y } = publicKey.export({ format: 'jwk' });
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const header = b64({ typ: 'dpop+jwt', alg: 'ES256', jwk: { kty, crv, x, y } });
const htu = server.ctx.urls.token;
const proof = () => {
  const input = `${header}.${b64({ htm: 'POST', htu, iat: Math.floor(Date.now() / 1000), jti: randomUUID() })}`;
  return `${input}.${sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
};
const quiet = { child: () => quiet, trace() {}, debug() {}, info() {}, warn() {}, error() {}, fatal() {} };

/** CPU µs per token, `TOKENS` tokens asked `AT_ONCE` at a time. */
async function cpuPerToken(bound: boolean): Promise<number> {
  const proofs = bound ? Array.from({ length: TOKENS }, proof) : [];
  let next = 0;
  const before = process.cpuUsage();
  await Promise.all(
    Array.from({ length: AT_ONCE }, async () => {
      while (next < TOKENS) {
        const i = next++;
        const headers: Record<string, string> = { authorization, 'content-type': 'application/x-www-form-urlencoded', ...(bound ? { dpop: proofs[i]! } : {}) };
        const req = { get: (name: string) => headers[name.toLowerCase()], ip: '127.0.0.1', socket: { remoteAddress: '127.0.0.1' }, log: quiet };
        const answer = (await tokenResponse(server.ctx, req as never, { grant_type: 'client_credentials' })) as { token_type?: string };
        if (answer.token_type !== (bound ? 'DPoP' : 'Bearer')) throw new Error(`unexpected answer: ${JSON.stringify(answer)}`);
      }
    }),
  );
  const used = process.cpuUsage(before);
  return (used.user + used.system) / TOKENS;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
await cpuPerToken(false); // warm-up: keys, statements, JIT
await cpuPerToken(true);
const bearer: number[] = [];
const bound: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  bearer.push(await cpuPerToken(false));
  bound.push(await cpuPerToken(true));
  process.stderr.write(`round ${r + 1}: bearer ${bearer[r]!.toFixed(0)} µs, DPoP-bound ${bound[r]!.toFixed(0)} µs\n`);
}
const b = median(bearer);
const d = median(bound);
process.stdout.write(
  [
    `CPU time per client_credentials token, ${TOKENS} tokens ${AT_ONCE} at a time, median of ${ROUNDS} alternating rounds (${server.ctx.store.sql.dialect}, node ${process.version})`,
    '',
    '| token | CPU µs per token |',
    '|---|---:|',
    `| bearer | ${b.toFixed(0)} |`,
    `| DPoP-bound (an ES256 proof verified and recorded) | ${d.toFixed(0)} |`,
    '',
    `A proof adds ${(d - b).toFixed(0)} µs; bearer / DPoP-bound CPU: ${((100 * b) / d).toFixed(0)}%`,
    '',
  ].join('\n'),
);
await server.stop();
process.exit(0);
