#!/usr/bin/env node
import { existsSync } from 'node:fs';
import { ConfigError } from './config.js';

const USAGE = `usage: gatehouse <command>

  serve                          start the server (configuration from the environment, see README)
  policy check [dir]             parse and validate policy files
  policy fmt [dir] [--check]     print or check the canonical layout
  policy test [dir]              run the test cases kept beside the policies
  policy diff <old> <new> [--json]
  policy explain ...             the decision for one request and every check behind it
  audit verify                   check the audit trail's hash chain (GATEHOUSE_DATABASE_URL or GATEHOUSE_DB)
  migrate [--check]              apply (or list) pending schema migrations
`;

function loadDotEnv(): void {
  if (existsSync('.env')) process.loadEnvFile('.env');
}

function fail(err: unknown): never {
  if (err instanceof ConfigError) {
    process.stderr.write(`gatehouse: ${err.message}\n`);
  } else {
    process.stderr.write(`gatehouse: ${err instanceof Error ? err.message : String(err)}\n`);
  }
  process.exit(1);
}

async function serve(): Promise<void> {
  loadDotEnv();
  const { serve: serveFromEnvironment } = await import('./server.js');
  await serveFromEnvironment();
}

async function main(argv: string[]): Promise<number | undefined> {
  const [command, ...rest] = argv;
  const io = {
    stdout: (s: string) => void process.stdout.write(s),
    stderr: (s: string) => void process.stderr.write(s),
    cwd: process.cwd(),
  };
  switch (command) {
    case 'serve':
      await serve();
      return undefined;
    case 'policy': {
      const { runPolicyCommand } = await import('./cli/policy.js');
      return runPolicyCommand(rest, io);
    }
    case 'audit': {
      loadDotEnv();
      const { runAuditCommand } = await import('./cli/audit.js');
      return runAuditCommand(rest, io);
    }
    case 'migrate': {
      loadDotEnv();
      const { runMigrateCommand } = await import('./cli/migrate.js');
      return runMigrateCommand(rest, io);
    }
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      io.stdout(USAGE);
      return command ? 0 : 2;
    default:
      io.stderr(`gatehouse: unknown command '${command}'\n${USAGE}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined) process.exitCode = code;
  },
  (err) => fail(err),
);
