import { expect, it } from 'vitest';
import { canonicalKey, subjectIdSchema, subjectMatches, type EventSubject } from '../../src/ssf/subjects.js';

const iss = 'https://id.example';
const person: EventSubject = { issuer: iss, user_id: 'u1', email: 'Pat@Example.com', session_id: 's1' };

it('matches subjects to the person of an event as SSF 1.0 subject matching says', () => {
  const yes = [
    { format: 'iss_sub', iss, sub: 'u1' },
    { format: 'email', email: 'pat@example.com' },
    { format: 'opaque', id: 'u1' },
    { format: 'aliases', identifiers: [{ format: 'email', email: 'x@y.z' }, { format: 'iss_sub', iss, sub: 'u1' }] },
    { format: 'complex', user: { format: 'iss_sub', iss, sub: 'u1' } },
    { format: 'complex', user: { format: 'email', email: 'PAT@example.com' }, session: { format: 'opaque', id: 's1' } },
    // members our events do not define are wildcards
    { format: 'complex', user: { format: 'iss_sub', iss, sub: 'u1' }, tenant: { format: 'opaque', id: 't' } },
  ];
  const no = [
    { format: 'iss_sub', iss: 'https://other.example', sub: 'u1' },
    { format: 'iss_sub', iss, sub: 'u2' },
    { format: 'email', email: 'someone@example.com' },
    { format: 'phone_number', phone_number: '+12065550100' },
    { format: 'complex', user: { format: 'iss_sub', iss, sub: 'u1' }, session: { format: 'opaque', id: 's2' } },
  ];
  for (const s of yes) expect(subjectMatches(s, person), JSON.stringify(s)).toBe(true);
  for (const s of no) expect(subjectMatches(s, person), JSON.stringify(s)).toBe(false);
  // without a session on the event, a session member does not exclude it
  expect(subjectMatches(no[4]!, { ...person, session_id: undefined })).toBe(true);
});

it('canonical keys ignore member order; the schema checks known formats', () => {
  expect(canonicalKey({ format: 'iss_sub', iss, sub: 'u1' })).toBe(canonicalKey({ sub: 'u1', format: 'iss_sub', iss }));
  expect(subjectIdSchema.safeParse({ format: 'iss_sub', iss, sub: 'u1' }).success).toBe(true);
  expect(subjectIdSchema.safeParse({ format: 'urn:example:custom', anything: 1 }).success).toBe(true);
  expect(subjectIdSchema.safeParse({ format: 'iss_sub', iss }).success).toBe(false);
  expect(subjectIdSchema.safeParse({ format: 'complex' }).success).toBe(false);
  expect(subjectIdSchema.safeParse({ format: 'complex', user: { format: 'email' } }).success).toBe(false);
  expect(subjectIdSchema.safeParse({ email: 'a@b.c' }).success).toBe(false);
});
