// Policy files at a git revision, read without a checkout: `git ls-tree` lists a directory of the
// revision, `git show REV:PATH` gives each file, in the repository of the current directory.
// Paths are those of the working tree, prefixed with the revision (`main:policies/a.policy`), so a
// diagnostic names where the text came from.

import { execFile } from 'node:child_process';
import { isAbsolute, relative, resolve } from 'node:path';
import type { SourceFile } from '../policy/types.js';

/** A revision that does not name a commit, no repository, or git missing: the message says which. */
export class GitError extends Error {}

function git(args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    if (args.some((a) => a.includes('\0'))) return fail(new GitError(`a path holding a NUL character cannot be read at a revision: ${args.find((a) => a.includes('\0'))!.replace(/\0/g, '\\0')}`));
    execFile('git', args, { cwd, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return fail(new GitError('git is not installed (needed to read a revision)'));
        return fail(err);
      }
      done({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

/** The full commit id `rev` names in the repository of `cwd`; GitError naming the revision otherwise. */
export async function resolveRevision(rev: string, cwd: string): Promise<string> {
  // A NUL cannot be passed to a process at all, and names no revision.
  if (!rev || rev.startsWith('-') || rev.includes('\0')) throw new GitError(`'${rev.replace(/\0/g, '\\0')}' is not a git revision`);
  const inRepo = await git(['rev-parse', '--is-inside-work-tree'], cwd);
  if (inRepo.code !== 0) throw new GitError(`'${rev}' is neither a file or directory nor a revision: ${cwd} is not in a git repository`);
  const r = await git(['rev-parse', '--verify', '--quiet', '--end-of-options', `${rev}^{commit}`], cwd);
  if (r.code !== 0) throw new GitError(`'${rev}' is neither a file or directory nor a git revision of this repository`);
  return r.stdout.trim();
}

/**
 * The files of `dir` (relative to cwd, or absolute inside the repository) at revision `rev`
 * ending with one of `exts`, sorted by name; not recursive, as for a directory on disk. A
 * directory the revision does not have is an error naming both.
 */
export async function filesAtRevision(rev: string, dir: string, exts: string[], cwd: string): Promise<SourceFile[]> {
  const commit = await resolveRevision(rev, cwd);
  const rel = isAbsolute(dir) ? relative(cwd, dir) : relative(cwd, resolve(cwd, dir));
  const spec = rel === '' ? '.' : rel;
  // Paths in the output are the repository's (--full-name), so `git show` finds each whatever cwd is.
  const listed = await git(['ls-tree', '--full-name', '-z', commit, '--', `${spec}/`], cwd);
  if (listed.code !== 0) throw new GitError(`cannot list ${spec} at ${rev}: ${listed.stderr.trim()}`);
  const entries = listed.stdout.split('\0').filter(Boolean).map((line) => {
    const tab = line.indexOf('\t');
    const [, type] = line.slice(0, tab).split(' ');
    return { type, path: line.slice(tab + 1) };
  });
  const tree = await git(['cat-file', '-t', `${commit}:${(await repoPath(spec, cwd))}`], cwd);
  if (tree.code !== 0 || tree.stdout.trim() !== 'tree') throw new GitError(`no directory ${spec} at ${rev}`);
  const files = entries.filter((e) => e.type === 'blob' && exts.some((x) => e.path.endsWith(x))).sort((a, b) => a.path.localeCompare(b.path));
  const out: SourceFile[] = [];
  for (const f of files) {
    const shown = await git(['show', `${commit}:${f.path}`], cwd);
    if (shown.code !== 0) throw new GitError(`cannot read ${f.path} at ${rev}: ${shown.stderr.trim()}`);
    const name = f.path.slice(f.path.lastIndexOf('/') + 1);
    out.push({ path: `${rev}:${spec === '.' ? name : `${spec.replace(/\/+$/, '')}/${name}`}`, text: shown.stdout });
  }
  return out;
}

/** A path relative to cwd as a path from the repository's root. */
async function repoPath(spec: string, cwd: string): Promise<string> {
  const prefix = (await git(['rev-parse', '--show-prefix'], cwd)).stdout.trim();
  const joined = relative('/', resolve('/', prefix, spec));
  return joined;
}
