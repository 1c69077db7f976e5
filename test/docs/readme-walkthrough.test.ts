// The README's five-minute walk-through cannot rot: its shell blocks run, in order, in one bash
// session against a started server, as a newcomer pastes them. Only starting and restarting the
// server is done here instead (in process, on a free port, with the variables the README's
// blocks set); every other line runs as written, with `localhost:3000` pointing at the server and
// `/tmp/` at a directory of the test's own. An output block the README shows after a shell
// block must appear, line for line, in what that block printed.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/paths.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const README = readFileSync(join(projectRoot, 'README.md'), 'utf8');

interface Block { lang: string; text: string }

/** The fenced blocks of the walk-through section, in order. */
function walkthroughBlocks(): Block[] {
  const start = README.indexOf('## Five minutes');
  const end = README.indexOf('\n## ', start + 1);
  const section = README.slice(start, end);
  return [...section.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, text: m[2]! }));
}

/** The lines that start, stop or wait for the server: the test does those itself. */
const SERVER_LINE = /npm (ci|start)|^until curl -sf localhost:3000\/healthz|^kill %1|^export GATEHOUSE_ADMIN_TOKEN=/;

function run(script: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile('bash', ['-c', script], {
      cwd: projectRoot,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      timeout: 150_000,
      maxBuffer: 16 * 1024 * 1024,
    }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

describe('the README walk-through', () => {
  const blocks = walkthroughBlocks();
  const shell = blocks.map((b, i) => ({ ...b, i })).filter((b) => b.lang === 'sh');
  const startBlock = shell.find((b) => /npm ci && npm start &/.test(b.text));
  const restartBlock = shell.find((b) => /kill %1/.test(b.text));
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-readme-'));
  const servers: TestServer[] = [];
  afterAll(async () => {
    for (const s of servers) await s.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts the server, restarts it with the examples, and shows its outputs', () => {
    expect(startBlock).toBeDefined();
    expect(restartBlock).toBeDefined();
    expect(blocks.filter((b) => b.lang === '').length).toBeGreaterThanOrEqual(2);
  });

  it('runs as written, block by block, and prints what it shows', async () => {
    const adminToken = /export GATEHOUSE_ADMIN_TOKEN=(\S+)/.exec(startBlock!.text)![1]!;
    // The restart's variables, as the README sets them before `npm start`.
    const restartLine = restartBlock!.text.split('\n').find((l) => /npm start/.test(l))!;
    const restartEnv = Object.fromEntries([...restartLine.matchAll(/\b([A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, join(projectRoot, m[2]!)]));
    expect(Object.keys(restartEnv).sort()).toEqual(['GATEHOUSE_POLICY_DIR', 'GATEHOUSE_PROJECT_FILE']);

    const tmp = join(dir, 'tmp');
    const vars = join(dir, 'vars.sh');
    const script = (from: number, to: number, port: number) =>
      shell
        .filter((b) => b.i >= from && b.i <= to)
        .map((b) => {
          const lines = b.text.split('\n').filter((l) => !SERVER_LINE.test(l));
          const text = lines.join('\n').replaceAll('localhost:3000', `localhost:${port}`).replaceAll('/tmp/', `${tmp}/`);
          return `echo "@@begin ${b.i}"\n${text}\necho "@@end ${b.i} exit $?"`;
        })
        .join('\n');
    const env = { GATEHOUSE_ADMIN_TOKEN: adminToken };
    const common = { GATEHOUSE_ADMIN_TOKEN: adminToken, GATEHOUSE_DB: join(dir, 'gatehouse.db') };

    // Up to the restart: the default policy directory, as `npm start` in the project folder has.
    const first = await startTestServer({ dir, env: { ...common, GATEHOUSE_POLICY_DIR: join(projectRoot, 'policies') } });
    servers.push(first);
    const a = await run(`mkdir -p ${tmp}\n${script(0, restartBlock!.i - 1, first.port)}\ndeclare -p ADMIN USER_ID > ${vars}`, env);
    await first.stop();
    servers.pop();

    const second = await startTestServer({ dir, env: { ...common, ...restartEnv } });
    servers.push(second);
    const b = await run(`source ${vars}\n${script(restartBlock!.i, Infinity, second.port)}`, env);

    const out = a.stdout + b.stdout;
    const outputOf = (i: number) => {
      const m = new RegExp(`@@begin ${i}\\n([\\s\\S]*?)@@end ${i} exit (\\d+)`).exec(out);
      if (!m) throw new Error(`block ${i} did not finish:\n${out.slice(-2000)}\n${a.stderr}\n${b.stderr}`);
      return { text: m[1]!, code: Number(m[2]) };
    };

    // Every output block shown matches what the shell block before it printed.
    for (const [k, block] of blocks.entries()) {
      if (block.lang !== '') continue;
      const before = shell.filter((s) => s.i < k).at(-1)!;
      const printed = outputOf(before.i).text.split('\n');
      for (const line of block.text.trim().split('\n')) expect(printed, `README block ${k}: ${line}`).toContain(line);
    }

    // What the comments and the prose promise.
    const having = (re: RegExp) => {
      const block = shell.find((s) => re.test(s.text));
      if (!block) throw new Error(`no walk-through block matches ${re}`);
      return outputOf(block.i);
    };
    expect(having(/openid-configuration/).text).toContain(`"issuer": "http://localhost:${first.port}"`);
    expect(having(/assignments/).text).toContain('204');
    expect(having(/CODE=/).text).toMatch(/\/callback\?code=[\w-]+&state=xyz&iss=/);
    const token = JSON.parse(having(/grant_type=authorization_code/).text);
    expect(token).toMatchObject({ token_type: 'Bearer', scope: 'openid profile email' });
    const explain = having(/policy explain/);
    expect(explain.text).toContain('decision: approval_required');
    expect(explain.text).toContain('amount sum max 500000 per 24h (used 0, this adds 2500)');
    expect(explain.text).toContain('exit 4');
    expect(having(/policy check --strict/).text).toMatch(/^ok: /m);
    const diff = having(/policy diff/);
    expect(diff.text).toContain('allow -> approval_required');
    expect(diff.code).toBe(1);
    expect(having(/grants\//).text).toContain('204');
    expect(JSON.parse(having(/"roles":\["admin"\]/).text)).toEqual({ email: 'ada@example.com', roles: ['admin'] });
  }, 300_000);
});
