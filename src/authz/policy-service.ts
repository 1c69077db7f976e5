import {
  loadPolicySet,
  readPolicyDir,
  type Diagnostic,
  type JsonRule,
  type PolicySet,
  type SourceFile,
} from '../policy/index.js';
import type { Store } from '../store/index.js';
import type { Rule } from '../store/rules.js';

const FILES_KEY = 'policy_files';

export const toJsonRule = (r: Rule): JsonRule => ({
  id: r.id,
  name: r.name,
  effect: r.effect,
  subjects: r.subjects,
  relation: r.relation,
  object: r.object,
  condition: r.condition,
});

export class PolicyLoadError extends Error {
  constructor(readonly diagnostics: Diagnostic[]) {
    super(`policy has ${diagnostics.length} error(s)`);
  }
}

/**
 * The policy in force: the policy files (as last loaded, kept in SQLite so every worker
 * process compiles the same set) plus the live rules of the management API. Compiled once
 * per change; `current()` costs one cheap counter read.
 */
export class PolicyService {
  private cached: { version: number; set: PolicySet } | undefined;

  constructor(
    private readonly store: Store,
    private readonly policyDir: string,
  ) {}

  /** Reads the policy directory, compiles it with the live rules and, if valid, makes it the one in force. */
  async reloadFromDisk(): Promise<PolicySet> {
    const files = await readPolicyDir(this.policyDir);
    const { policySet, diagnostics } = loadPolicySet({ files, rules: this.store.rules.live().map(toJsonRule) });
    if (!policySet) throw new PolicyLoadError(diagnostics);
    this.store.transaction(() => {
      this.store.settings.set(FILES_KEY, JSON.stringify(files));
      this.store.settings.bump('policy');
    });
    this.cached = undefined;
    return this.current();
  }

  /** The policy files in force (path and text), as last loaded. */
  files(): SourceFile[] {
    const raw = this.store.settings.get(FILES_KEY);
    return raw ? (JSON.parse(raw) as SourceFile[]) : [];
  }

  /** Would the policy still compile with these live rules? Used before a rule goes live. */
  check(rules: JsonRule[]): Diagnostic[] {
    return loadPolicySet({ files: this.files(), rules }).diagnostics;
  }

  /** The compiled policy in force. Live rules that no longer compile are left out rather than failing every decision. */
  current(): PolicySet {
    const version = this.store.settings.version('policy');
    if (this.cached?.version === version) return this.cached.set;
    const files = this.files();
    const rules = this.store.rules.live().map(toJsonRule);
    let { policySet } = loadPolicySet({ files, rules });
    if (!policySet) {
      // A live rule is always validated first, so this is unexpected; fall back to the files alone.
      policySet = loadPolicySet({ files, rules: [] }).policySet;
      if (!policySet) throw new Error('the stored policy files do not compile');
    }
    this.remember(policySet, files, rules);
    this.cached = { version, set: policySet };
    return policySet;
  }

  /**
   * Keeps each version that comes into force with what it was compiled from, so any two can
   * be compared later. History is a convenience: failing to write it never fails a decision.
   */
  private remember(set: PolicySet, files: SourceFile[], rules: JsonRule[]): void {
    if (set.version === this.lastRemembered) return;
    try {
      const inForce = new Set(set.sources.map((s) => s.path));
      this.store.policyVersions.record(set.version, files, rules.filter((r) => inForce.has(`api:rule/${r.id}`)));
      this.lastRemembered = set.version;
    } catch {
      // a read-only moment (or a busy database) only costs this version's entry in the history
    }
  }
  private lastRemembered: string | undefined;

  /** Marks the policy as changed (a rule went live or stopped being live). */
  invalidate(): void {
    this.store.settings.bump('policy');
  }
}
