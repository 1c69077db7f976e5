import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAuthzen, type AuthzenFixture } from './helpers.js';

// A relation `r` of type `t` is the action `r` on resources of type `t` (the permission
// `r:<plural of t>`). A type whose name ends in a single "s" has no English plural that reads
// back to it ("buses" reads as "buse"): a `kind` declaration gives it one, and `policy check`
// warns until there is. Without one its relations grant nothing (fail closed).

const MODEL = `policy "transit" version 1

type user

type bus {
  relation driver: [user]
}

type campus {
  relation member: [user]
}

kind "buses" singular "bus"
`;

let f: AuthzenFixture;

beforeAll(async () => {
  f = await startAuthzen({ policies: { 'transit.policy': MODEL } });
  const w = await f.server.admin('POST', '/relationships', {
    writes: [
      { object: 'bus:42', relation: 'driver', subject: 'user:dora' },
      { object: 'campus:north', relation: 'member', subject: 'user:dora' },
    ],
  });
  expect(w.status, JSON.stringify(w.body)).toBe(200);
});
afterAll(async () => {
  await f?.server.stop();
});

const evaluate = async (action: string, type: string, id: string) => {
  const r = await f.post('/access/v1/evaluation', { subject: { type: 'user', id: 'dora' }, action: { name: action }, resource: { type, id } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.decision as boolean;
};

describe('relations of a type whose plural English cannot read back', () => {
  it('are actions once a kind declares the plural', async () => {
    expect(await evaluate('driver', 'bus', '42')).toBe(true);
    expect(await evaluate('driver', 'bus', '7')).toBe(false);
    const r = await f.post('/access/v1/search/resource', { subject: { type: 'user', id: 'dora' }, action: { name: 'driver' }, resource: { type: 'bus' } });
    expect(r.body.results).toEqual([{ type: 'bus', id: '42' }]);
  });

  it('grant nothing without one (policy check warns of it)', async () => {
    expect(await evaluate('member', 'campus', 'north')).toBe(false);
    // The relationship itself holds: only the action has no permission to map to.
    expect((await f.server.admin('POST', '/relationships/check', { object: 'campus:north', relation: 'member', subject: 'user:dora' })).body.allowed).toBe(true);
  });
});
