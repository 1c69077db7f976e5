import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * A PostgreSQL cluster of the test's own, in a temporary directory, that the test can stop and
 * start (as .ci/run starts one: initdb as an unprivileged user when running as root, a random
 * port, durability off). Found through `initdb` on the PATH or Debian's /usr/lib/postgresql.
 */
export interface ThrowawayPostgres {
  url: string;
  stop(): void;
  start(): void;
  destroy(): void;
}

export function findInitdb(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && existsSync(join(dir, 'initdb'))) return join(dir, 'initdb');
  }
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb')));
  versions.sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a));
  return versions[0] ? join(root, versions[0], 'bin', 'initdb') : undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function unprivilegedUser(): string {
  for (const name of ['postgres', 'gatehouse-ci']) {
    try {
      execFileSync('id', [name], { stdio: 'ignore' });
      return name;
    } catch {
      /* not there */
    }
  }
  execFileSync('useradd', ['--system', '--no-create-home', 'gatehouse-ci']);
  return 'gatehouse-ci';
}

export async function startThrowawayPostgres(initdb: string): Promise<ThrowawayPostgres> {
  const bin = dirname(initdb);
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-pg-'));
  chmodSync(dir, 0o755);
  const port = await freePort();
  const asRoot = process.getuid?.() === 0;
  const user = asRoot ? unprivilegedUser() : undefined;
  if (user) execFileSync('chown', [user, dir]);
  const run = (tool: string, args: string[]) => {
    const [cmd, argv] = user ? ['runuser', ['-u', user, '--', join(bin, tool), ...args]] : [join(bin, tool), args];
    execFileSync(cmd, argv, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  };
  run('initdb', ['-D', join(dir, 'data'), '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8']);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off`;
  const start = () => run('pg_ctl', ['-D', join(dir, 'data'), '-l', join(dir, 'server.log'), '-w', '-t', '60', 'start', '-o', options]);
  start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start,
    // fast: every session is ended, as when the server is restarted by an operator
    stop: () => run('pg_ctl', ['-D', join(dir, 'data'), '-m', 'fast', '-w', 'stop']),
    destroy() {
      try {
        run('pg_ctl', ['-D', join(dir, 'data'), '-m', 'immediate', 'stop']);
      } catch {
        /* already stopped */
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
