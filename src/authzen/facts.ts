// What a search knows about the subjects and resources it tries, read once per request: the
// same facts the decision pipeline reads for an evaluation (a `user` is the stored person of
// that id, an `agent` the stored agent; a resource's attributes are its stored entity's), with
// the request's `properties` filling in what the store does not hold.

import type { AppContext } from '../context.js';
import type { SubjectLoader } from '../authz/pipeline.js';
import { entityAttributes, namedSubjectFacts, withProperties, withSubjectProperties } from '../authz/facts.js';
import type { Attributes, PersonFacts, SubjectFacts } from '../authz/policy-interface.js';
import type { Properties, Subject } from './request.js';

export type { Attributes, PersonFacts, SubjectFacts };

export type ResolvedSubject = { found: true; subject: SubjectFacts; person: PersonFacts | null } | { found: false };

/** Lookups shared by the evaluations of one request (a batch, a search): each subject and resource read once. */
export class FactsMemo {
  private named = new Map<string, ReturnType<typeof namedSubjectFacts>>();
  private entities = new Map<string, Promise<Attributes>>();

  constructor(private readonly ctx: AppContext) {}

  /** The stored facts of a named subject, read once per request (the pipeline's loader, memoised). */
  readonly load: SubjectLoader = (ctx, type, id) => {
    const key = `${type}\u0000${id}`;
    let p = this.named.get(key);
    if (!p) this.named.set(key, (p = namedSubjectFacts(ctx, type, id)));
    return p;
  };

  /** The subject's facts with the request's properties (the stored attributes win a clash). */
  async subject(s: Subject): Promise<ResolvedSubject> {
    const f = await this.load(this.ctx, s.type, s.id);
    if (!f) return { found: false };
    return { found: true, ...withSubjectProperties(f, s.properties) };
  }

  /** The resource's attributes: its stored entity's, then the request's properties. */
  async resource(type: string, id: string, properties: Properties | undefined): Promise<Attributes> {
    const key = `${type}:${id}`;
    let p = this.entities.get(key);
    if (!p) this.entities.set(key, (p = Promise.resolve(entityAttributes(this.ctx, key))));
    return withProperties(await p, properties);
  }
}
