// The policy set version: the declared `policy "<name>" version <n>` of each
// file plus a content hash over every source. The hash is taken of the
// canonical layout without comments, so reformatting or re-commenting a file
// keeps the version, while any change of meaning (or of rule order) changes it. Only content
// counts: the same files read through another path (relative or absolute, another checkout, the
// server's policy directory) have the same version, so a version printed in CI is the one the
// audit trail records.

import { createHash } from 'node:crypto';
import type { PolicySetSource } from './types.js';
import type { PolicyFileNode, RuleNode } from './ast.js';
import { formatFile, formatRule } from './format.js';

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export function fileSource(file: PolicyFileNode): PolicySetSource {
  const s: PolicySetSource = { path: file.path, hash: sha256(formatFile(file, { withComments: false })) };
  if (file.header) { s.policy = file.header.name; s.version = file.header.version; }
  return s;
}

export function apiRuleSource(rule: RuleNode): PolicySetSource {
  return { path: rule.loc?.file ?? `api:rule/${rule.apiId ?? rule.name}`, hash: sha256(formatRule(rule)) };
}

/** `deployments@1,exports@2,refunds@3#9f2c0a1b3c4d` (or `unversioned#...` when no file declares a version). */
export function policyVersion(sources: PolicySetSource[]): string {
  const decls = sources
    .filter((s) => s.policy !== undefined)
    .map((s) => `${s.policy}@${s.version}`)
    .sort();
  const hash = sha256(sources.map((s) => `${s.hash}\n`).join('')).slice(0, 12);
  return `${decls.length ? decls.join(',') : 'unversioned'}#${hash}`;
}
