// The relationship graph of one process: every stored relationship in the engine's in-memory
// index, loaded once at start and kept current by following the store's change log.
//
//   1. load     read the newest change's sequence number, then every relationship in chunks
//               (changes committed during the load are applied again from the log: a write is
//               idempotent and a delete of what is gone does nothing, so the index ends right)
//   2. follow   whenever the `relationships` change counter moves, apply `changesSince(lastSeq)`
//               in commit order; the counter is looked at most once per event-loop turn (the
//               turn's decisions share one look), and on PostgreSQL it is pushed to every
//               instance, so a change is in force everywhere well within a second
//   3. reload   when the log no longer holds the changes after `lastSeq` (housekeeping pruned
//               them while this process was behind), every relationship is read again
//
// The model (types, relations, conditions) is the policy set's; relationships it no longer
// allows stay stored and the checker ignores them. A load or follow that fails (the database
// away) fails the decision that asked, which denies; the next one tries again from where the
// index stands.

import type { AppContext } from '../context.js';
import { MemoryIndex } from '../policy/relations/index.js';
import { emptyModel, type RelationModel } from '../policy/relations/model.js';
import { relationChecker, type RelationChecker } from '../policy/relations/checker.js';
import { RELATIONSHIPS_DOMAIN, type Relationship } from '../store/relationships.js';
import type { PolicySet } from './policy-interface.js';

/** How many relationships one read of the initial load takes. */
const LOAD_CHUNK = 10_000;
/** How many changes one read of the log takes while following. */
const FOLLOW_CHUNK = 10_000;

export class RelationshipGraph {
  private index: MemoryIndex | null = null;
  /** The change counter the index is current with (-1: never loaded). */
  private version = -1;
  /** The last change of the log applied to the index. */
  private lastSeq = 0;
  /** The look of this event-loop turn, shared by its callers. */
  private turn: Promise<MemoryIndex> | undefined;
  /** The one refresh in flight (a look that finds the counter moved waits for it). */
  private refreshing: Promise<MemoryIndex> | undefined;
  /** Times the whole graph was read (the first load included), for tests and metrics. */
  loads = 0;

  constructor(private readonly ctx: AppContext) {}

  /** The index, current with every change committed before this turn's look. */
  current(): Promise<MemoryIndex> {
    if (!this.turn) {
      const look = this.look();
      this.turn = look;
      setImmediate(() => {
        if (this.turn === look) this.turn = undefined;
      });
      // A failed look is not kept: the next caller, even in this turn, tries again.
      look.catch(() => {
        if (this.turn === look) this.turn = undefined;
      });
    }
    return this.turn;
  }

  /**
   * Where the index stands: changes with every change applied and every full reload, so a
   * result computed from the graph can be kept under it (AuthZEN search pages).
   */
  get stamp(): string {
    return `${this.loads}.${this.lastSeq}`;
  }

  /** How many relationships the index holds (0 before the first load). */
  get size(): number {
    return this.index?.size ?? 0;
  }

  private async look(): Promise<MemoryIndex> {
    const v = await this.ctx.store.changes.version(RELATIONSHIPS_DOMAIN);
    if (this.index && v === this.version) return this.index;
    return this.refresh(v);
  }

  private refresh(v: number): Promise<MemoryIndex> {
    if (!this.refreshing) {
      const r = (this.index ? this.follow() : this.load()).then((index) => {
        // The counter read before the refresh: anything committed after it moves it again.
        this.version = Math.max(this.version, v);
        return index;
      });
      this.refreshing = r.finally(() => {
        this.refreshing = undefined;
      });
      return this.refreshing;
    }
    // A refresh started before this counter was read may have missed its change: follow once more.
    return this.refreshing.then(() => (this.version >= v ? this.index! : this.refresh(v)));
  }

  /** Step 1: everything, then the log from where the load began. */
  private async load(): Promise<MemoryIndex> {
    const rels = this.ctx.store.relationships;
    const from = await rels.latestChange();
    const index = new MemoryIndex();
    for await (const chunk of rels.each(LOAD_CHUNK)) for (const r of chunk) index.add(r);
    this.index = index;
    this.lastSeq = from;
    this.loads++;
    return this.follow();
  }

  /** Step 2 (or 3, when the log was pruned past where this index stands). */
  private async follow(): Promise<MemoryIndex> {
    const rels = this.ctx.store.relationships;
    for (;;) {
      const changes = await rels.changesSince(this.lastSeq, FOLLOW_CHUNK);
      if (changes.length && changes[0]!.seq > this.lastSeq + 1) {
        // A gap: a rolled-back write's sequence number, or changes pruned from the log. Only the
        // log's oldest entry tells them apart; when it is past the gap, read everything again.
        const oldest = await rels.oldestChange();
        if (oldest === undefined || oldest > this.lastSeq + 1) {
          this.index = null;
          return this.load();
        }
      }
      const index = this.index!;
      for (const c of changes) {
        if (c.op === 'write') index.add(c.relationship);
        else index.remove(c.relationship);
        this.lastSeq = c.seq;
      }
      if (changes.length < FOLLOW_CHUNK) return index;
    }
  }
}

const graphs = new WeakMap<AppContext, RelationshipGraph>();

/** The graph of one context (one per process; tests run several servers in one process). */
export function relationshipGraph(ctx: AppContext): RelationshipGraph {
  let g = graphs.get(ctx);
  if (!g) graphs.set(ctx, (g = new RelationshipGraph(ctx)));
  return g;
}

const EMPTY_MODEL = emptyModel();

/** The relation model of the policy set in force (types, relations, conditions); empty without one. */
export function relationModel(set: PolicySet | null | undefined): RelationModel {
  return set?.compiled.relations ?? EMPTY_MODEL;
}

/** The checker of the policy set in force over the process's current graph. */
export async function relationsInForce(ctx: AppContext): Promise<{ model: RelationModel; checker: RelationChecker; index: MemoryIndex }> {
  const [state, index] = await Promise.all([ctx.policy.state(), relationshipGraph(ctx).current()]);
  const model = relationModel(state.set);
  return { model, checker: relationChecker(model, index), index };
}

export type { Relationship };
