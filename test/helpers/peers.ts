// The peer material the tests read (OpenFGA's sample stores, the OOPSLA 2024 benchmarks) sits
// beside the repository: `<repository>/../shared/peers`. In a git worktree the repository is the
// one the worktree belongs to, found through the `.git` file's `gitdir:` line.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { projectRoot } from '../../src/paths.js';

function repositoryRoots(): string[] {
  const roots = [projectRoot];
  const dotGit = join(projectRoot, '.git');
  try {
    if (statSync(dotGit).isFile()) {
      const m = /^gitdir:\s*(.+)$/m.exec(readFileSync(dotGit, 'utf8'));
      // `<repo>/.git/worktrees/<name>`: the repository is two levels above `worktrees`.
      if (m) roots.push(dirname(dirname(dirname(resolve(projectRoot, m[1]!.trim())))));
    }
  } catch { /* no .git: a plain copy */ }
  return roots;
}

/** The peers folder, or undefined when it is absent (tests then skip, saying so). */
export const PEERS: string | undefined = repositoryRoots().map((r) => join(r, '..', 'shared', 'peers')).find((p) => existsSync(p));

export const PEERS_MISSING = 'skipped: ../shared/peers (the OpenFGA sample stores and OOPSLA benchmarks) is absent beside the repository';

export const SAMPLE_STORES = PEERS && join(PEERS, 'openfga-sample-stores', 'stores');
export const OOPSLA = PEERS && join(PEERS, 'oopsla2024', 'benches');
