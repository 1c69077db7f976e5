// `gatehouse policy import openfga <file> [--out dir]`: an OpenFGA model or store file as a policy
// file (and, for a store file, its relationships as JSON and its tests as a `.tests` file).
// Without --out the policy is printed. Exit 0 when imported, 2 when the file cannot be read or
// holds something the import cannot carry over: every such place as `file:line: why`.

import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { makeDirectory } from '../paths.js';
import { isAbsolute, join, resolve } from 'node:path';
import { importOpenfga, renderRefusals, type ReadText } from '../policy/openfga/index.js';
import type { CliIO, ParsedArgs } from './args.js';

export async function importOpenfgaCommand(a: ParsedArgs, io: CliIO): Promise<number> {
  const file = a.positionals[0]!;
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(io.cwd, p));
  const read: ReadText = (path) => {
    try {
      return { text: readFileSync(abs(path), 'utf8') };
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      return { error: code === 'ENOENT' ? `no such file: ${path}` : code === 'EISDIR' ? `is a directory: ${path}` : `cannot read ${path}: ${(e as Error).message}` };
    }
  };
  const result = importOpenfga(file, read);
  if (!result.ok) {
    io.stderr(renderRefusals(result.refusals));
    return 2;
  }
  const out = a.options.get('--out');
  if (typeof out !== 'string') {
    io.stdout(result.value.policy);
    return 0;
  }
  const { stem, policy, tests, relationships } = result.value;
  const files: [string, string][] = [[`${stem}.policy`, policy]];
  if (tests !== undefined) files.push([`${stem}.tests`, tests]);
  if (relationships !== undefined) files.push([`${stem}.relationships.json`, JSON.stringify(relationships, null, 2) + '\n']);
  try {
    makeDirectory(abs(out));
    for (const [name, text] of files) {
      await writeFile(abs(join(out, name)), text);
      io.stdout(join(out, name) + '\n');
    }
  } catch (e) {
    io.stderr(`cannot write into ${out}: ${(e as Error).message}\n`);
    return 2;
  }
  return 0;
}
