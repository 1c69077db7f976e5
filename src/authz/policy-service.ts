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
    const { policySet, diagnostics } = loadPolicySet({ files, rules: (await this.store.rules.live()).map(toJsonRule) });
    if (!policySet) throw new PolicyLoadError(diagnostics);
    await this.store.transaction(async (tx) => {
      await tx.settings.set(FILES_KEY, JSON.stringify(files));
      await tx.settings.bump('policy');
    });
    this.cached = undefined;
    return this.current();
  }

  /** The policy files in force (path and text), as last loaded. */
  async files(store: Store = this.store): Promise<SourceFile[]> {
    const raw = await store.settings.get(FILES_KEY);
    return raw ? (JSON.parse(raw) as SourceFile[]) : [];
  }

  /** Would the policy still compile with these live rules? Used before a rule goes live (`store`: the caller's transaction). */
  async check(rules: JsonRule[], store: Store = this.store): Promise<Diagnostic[]> {
    return loadPolicySet({ files: await this.files(store), rules }).diagnostics;
  }

  private compiling: { version: number; set: Promise<PolicySet> } | undefined;

  /**
   * The compiled policy in force (one change-stamp read; compiled again only after a change,
   * once however many requests ask meanwhile). Live rules that no longer compile are left out
   * rather than failing every decision.
   */
  async current(): Promise<PolicySet> {
    const version = await this.store.settings.version('policy');
    if (this.cached?.version === version) return this.cached.set;
    if (this.compiling?.version !== version) {
      const compiling = { version, set: this.compile() };
      this.compiling = compiling;
      compiling.set.then(
        (set) => {
          if (this.compiling === compiling) this.compiling = undefined;
          if (!this.cached || this.cached.version !== version) this.cached = { version, set };
        },
        () => {
          if (this.compiling === compiling) this.compiling = undefined;
        },
      );
    }
    return this.compiling!.set;
  }

  private async compile(): Promise<PolicySet> {
    const files = await this.files();
    const rules = (await this.store.rules.live()).map(toJsonRule);
    let { policySet } = loadPolicySet({ files, rules });
    if (!policySet) {
      // A live rule is always validated first, so this is unexpected; fall back to the files alone.
      policySet = loadPolicySet({ files, rules: [] }).policySet;
      if (!policySet) throw new Error('the stored policy files do not compile');
    }
    await this.remember(policySet, files, rules);
    return policySet;
  }

  /**
   * Keeps each version that comes into force with what it was compiled from, so any two can
   * be compared later. History is a convenience: failing to write it never fails a decision.
   */
  private async remember(set: PolicySet, files: SourceFile[], rules: JsonRule[]): Promise<void> {
    if (set.version === this.lastRemembered) return;
    try {
      const inForce = new Set(set.sources.map((s) => s.path));
      await this.store.policyVersions.record(set.version, files, rules.filter((r) => inForce.has(`api:rule/${r.id}`)));
      this.lastRemembered = set.version;
    } catch {
      // a read-only moment (or a busy database) only costs this version's entry in the history
    }
  }
  private lastRemembered: string | undefined;

  /** Marks the policy as changed (a rule went live or stopped being live). */
  async invalidate(tx: Store = this.store): Promise<void> {
    await tx.settings.bump('policy');
  }
}
