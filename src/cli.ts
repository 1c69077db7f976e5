#!/usr/bin/env node
// The `gatehouse` command line; src/cli/commands.ts declares every command.
import { runCli } from './cli/main.js';

// `gatehouse policy fmt | head` closes the pipe early: stop quietly, as other tools do.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw err;
});

runCli(process.argv.slice(2), {
  stdout: (s) => void process.stdout.write(s),
  stderr: (s) => void process.stderr.write(s),
  cwd: process.cwd(),
}).then(
  (code) => {
    if (code !== undefined) process.exitCode = code;
  },
  (err: unknown) => {
    // One line, never a stack trace: a configuration error names its variable in its message.
    process.stderr.write(`gatehouse: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
