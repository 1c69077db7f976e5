import {
  formatDiagnostic,
  loadPolicySet,
  readPolicyDir,
  type Diagnostic,
  type JsonRule,
  type PolicySet,
  type SourceFile,
} from './policy/index.js';
import type { Logger } from './logger.js';
import { invariantDiagnostics } from './policy/verify.js';
import type { Store } from './store/index.js';
import type { Rule } from './store/rules.js';

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

/** No policy has compiled in this process yet: every decision is a deny. */
export class PolicyUnavailableError extends Error {
  constructor() {
    super('no policy has compiled');
  }
}

/**
 * `ok`: the stored files and the live rules compile together and are in force.
 * `stale`: they do not (any more); the last set that compiled is still in force.
 * `unavailable`: nothing has compiled in this process; every decision is `deny` (`policy_unavailable`).
 */
export type PolicyStatus = 'ok' | 'stale' | 'unavailable';

export interface PolicyState {
  status: PolicyStatus;
  /** the set in force; null only when unavailable */
  set: PolicySet | null;
  /** why the stored set does not compile (stale or unavailable) */
  problems: string[];
}

/**
 * The policy in force: the policy files (as last loaded, kept in the database so every process
 * and instance compiles the same set) plus the live rules of the management API. Compiled once
 * per change of the `policy` stamp (once however many requests ask meanwhile).
 *
 * Never fails open: when the stored files and live rules stop compiling together, the last set
 * that compiled stays in force and the state says `stale` (in /healthz, the log and a metric);
 * rules are never silently left out.
 */
export class PolicyService {
  private compiled: { version: number; state: PolicyState } | undefined;
  private compiling: { version: number; state: Promise<PolicyState> } | undefined;
  private lastGood: PolicySet | null = null;

  constructor(
    private readonly store: Store,
    private readonly policyDir: string,
    private readonly logger?: Logger,
  ) {}

  /** Reads the policy directory, compiles it with the live rules and, if valid, makes it the one in force. */
  async reloadFromDisk(record?: (tx: Store, version: string) => Promise<void>): Promise<PolicySet> {
    const files = await readPolicyDir(this.policyDir);
    const { policySet, diagnostics } = loadPolicySet({ files, rules: (await this.store.rules.live()).map(toJsonRule) });
    if (!policySet) throw new PolicyLoadError(diagnostics);
    await this.store.transaction(async (tx) => {
      await tx.settings.set(FILES_KEY, JSON.stringify(files));
      await tx.settings.bump('policy');
      await record?.(tx, policySet.version);
    });
    return this.current();
  }

  /** The policy files in force (path and text), as last loaded. */
  async files(store: Store = this.store): Promise<SourceFile[]> {
    const raw = await store.settings.get(FILES_KEY);
    return raw ? (JSON.parse(raw) as SourceFile[]) : [];
  }

  /** Would the policy still compile with these live rules? Used before a rule goes live (`store`: the caller's transaction). */
  async check(rules: JsonRule[], store: Store = this.store): Promise<Diagnostic[]> {
    const { policySet, diagnostics } = loadPolicySet({ files: await this.files(store), rules });
    // A set that breaks an invariant of the files (or one that cannot be proven) is refused as an error would be.
    return policySet ? [...diagnostics, ...invariantDiagnostics(policySet)] : diagnostics;
  }

  /** The compiled set in force (stale or not); throws PolicyUnavailableError when there is none. */
  async current(): Promise<PolicySet> {
    const { set } = await this.state();
    if (!set) throw new PolicyUnavailableError();
    return set;
  }

  /** The state last computed, without reading the database (for logs in between). */
  peek(): PolicyState | undefined {
    return this.compiled?.state;
  }

  /** Marks the policy as changed (a rule went live or stopped being live). */
  async invalidate(tx: Store = this.store): Promise<void> {
    await tx.settings.bump('policy');
  }

  /** The policy state now: one change-stamp read, a compile only after a change. */
  async state(): Promise<PolicyState> {
    let version: number;
    try {
      version = await this.store.settings.version('policy');
    } catch (err) {
      // The database cannot be read: keep deciding with what compiled last (or deny when nothing did).
      this.logger?.error({ err }, 'the policy stamp could not be read');
      return this.compiled?.state ?? { status: 'unavailable', set: null, problems: ['the database could not be read'] };
    }
    if (this.compiled?.version === version) return this.compiled.state;
    if (this.compiling?.version !== version) {
      const compiling = { version, state: this.compile(version) };
      this.compiling = compiling;
      void compiling.state.finally(() => {
        if (this.compiling === compiling) this.compiling = undefined;
      });
    }
    return this.compiling!.state;
  }

  private async compile(version: number): Promise<PolicyState> {
    let problems: string[];
    try {
      const files = await this.files();
      const rules = (await this.store.rules.live()).map(toJsonRule);
      const { policySet, diagnostics } = loadPolicySet({ files, rules });
      if (policySet) {
        const state: PolicyState = { status: 'ok', set: policySet, problems: [] };
        if (this.compiled && this.compiled.state.status !== 'ok') this.logger?.info({ policy_version: policySet.version }, 'policy compiles again');
        this.lastGood = policySet;
        this.settle(version, state);
        await this.remember(policySet, files, rules);
        return state;
      }
      problems = diagnostics.map(formatDiagnostic);
    } catch (err) {
      problems = [`the stored policy could not be read: ${err instanceof Error ? err.message : String(err)}`];
    }
    const state: PolicyState = this.lastGood
      ? { status: 'stale', set: this.lastGood, problems }
      : { status: 'unavailable', set: null, problems };
    this.logger?.error(
      { policy_status: state.status, policy_version: state.set?.version ?? null, problems: problems.slice(0, 20) },
      state.status === 'stale'
        ? 'the stored policy files and live rules do not compile together; the last policy that compiled stays in force'
        : 'the stored policy files and live rules do not compile together and no earlier policy compiled; every decision is denied',
    );
    this.settle(version, state);
    return state;
  }

  /** Keeps the newest state only (compiles of two versions may finish out of order). */
  private settle(version: number, state: PolicyState): void {
    if (!this.compiled || this.compiled.version <= version) this.compiled = { version, state };
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
}
