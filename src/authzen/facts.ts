// What a search knows about the subjects and resources it tries, read once per request: the
// same facts the decision pipeline reads for an evaluation (a `user` is the stored person of
// that id, an `agent` the stored agent; a resource's attributes are its stored entity's), with
// the request's `properties` filling in what the store does not hold.

import type { AppContext } from '../context.js';
import { entityAttributes, namedSubjectFacts, withProperties } from '../authz/facts.js';
import type { Attributes, PersonFacts, SubjectFacts } from '../authz/policy-interface.js';
import type { Properties, Subject } from './request.js';

export type { Attributes, PersonFacts, SubjectFacts };

export type ResolvedSubject = { found: true; subject: SubjectFacts; person: PersonFacts | null } | { found: false };

/** Lookups shared by the candidates of one search. */
export class FactsMemo {
  private subjects = new Map<string, Promise<ResolvedSubject>>();
  private entities = new Map<string, Promise<Attributes>>();

  constructor(private readonly ctx: AppContext) {}

  /** The subject's facts with the request's properties (the stored attributes win a clash). */
  subject(s: Subject): Promise<ResolvedSubject> {
    const key = `${s.type}\u0000${s.id}`;
    let p = this.subjects.get(key);
    if (!p) {
      p = namedSubjectFacts(this.ctx, s.type, s.id).then((f) => (f ? { found: true, ...f } : { found: false }));
      this.subjects.set(key, p);
    }
    return p.then((r) => (r.found && s.properties ? withSubjectProperties(r, s.properties) : r));
  }

  /** The resource's attributes: its stored entity's, then the request's properties. */
  async resource(type: string, id: string, properties: Properties | undefined): Promise<Attributes> {
    const key = `${type}:${id}`;
    let p = this.entities.get(key);
    if (!p) this.entities.set(key, (p = Promise.resolve(entityAttributes(this.ctx, key))));
    return withProperties(await p, properties);
  }
}

function withSubjectProperties(r: Extract<ResolvedSubject, { found: true }>, properties: Properties): ResolvedSubject {
  const subject = { ...r.subject, attributes: withProperties(r.subject.attributes, properties) };
  // A person asked about directly is their own person: both read the same attributes.
  const person = r.person && subject.type === 'user' ? { ...r.person, attributes: subject.attributes } : r.person;
  return { found: true, subject, person };
}
