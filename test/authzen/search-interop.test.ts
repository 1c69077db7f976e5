// The AuthZEN working group's Search interop scenario (six people, twenty records; view, edit,
// delete) as a Gatehouse example set, and every expected answer of its subject,
// resource and action search tables, compared the way its test harness compares them: the
// results sorted, then matched exactly as JSON.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveExample, type AuthzenFixture } from './helpers.js';

// The scenario is policies/examples/authzen-search (its rules, and its people and records in
// the project file), served as `npm start` serves it.
const EXAMPLE = join(import.meta.dirname, '../../policies/examples/authzen-search');
const PROJECT = JSON.parse(readFileSync(join(EXAMPLE, 'project.json'), 'utf8')) as { users: { id: string }[]; entities: { id: string }[] };

/** The scenario's subject search table: record, action, the people allowed. */
const SUBJECTS = `
101 view alice bob carol dan | 101 edit alice | 101 delete alice
102 view alice bob carol dan | 102 edit bob | 102 delete bob
103 view alice bob carol dan | 103 edit carol | 103 delete carol
104 view alice dan felix | 104 edit dan | 104 delete dan
105 view alice bob carol dan erin | 105 edit erin | 105 delete erin
106 view alice dan felix | 106 edit felix | 106 delete felix
107 view alice dan | 107 edit alice | 107 delete alice
108 view alice bob carol dan | 108 edit bob | 108 delete bob
109 view alice carol dan felix | 109 edit carol | 109 delete carol
110 view alice dan | 110 edit alice dan | 110 delete dan
111 view alice dan erin felix | 111 edit erin | 111 delete erin
112 view alice bob carol dan felix | 112 edit felix | 112 delete felix
113 view alice dan | 113 edit alice | 113 delete alice
114 view alice bob dan felix | 114 edit bob | 114 delete bob
115 view alice carol dan erin | 115 edit carol dan | 115 delete carol
116 view alice bob carol dan | 116 edit dan | 116 delete dan
117 view alice bob carol dan erin | 117 edit erin | 117 delete erin
118 view alice dan felix | 118 edit felix | 118 delete felix
119 view alice bob carol dan | 119 edit alice | 119 delete alice
120 view alice bob dan felix | 120 edit bob | 120 delete bob`;

/** The scenario's resource search table: person, action, the records allowed. */
const RESOURCES = `
alice view 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120
alice edit 101 107 110 113 119 | alice delete 101 107 113 119
bob view 101 102 103 105 108 112 114 116 117 119 120 | bob edit 102 108 114 120 | bob delete 102 108 114 120
carol view 101 102 103 105 108 109 112 115 116 117 119 | carol edit 103 109 115 | carol delete 103 109 115
dan view 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120
dan edit 104 110 115 116 | dan delete 104 110 116
erin view 105 111 115 117 | erin edit 105 111 117 | erin delete 105 111 117
felix view 104 106 109 111 112 114 118 120 | felix edit 106 112 118 | felix delete 106 112 118`;

/** The scenario's action search table: person, record, the actions allowed (a pair not listed allows none). */
const ACTIONS = `
alice 101 view edit delete | alice 102 view | alice 103 view | alice 104 view | alice 105 view | alice 106 view
alice 107 view edit delete | alice 108 view | alice 109 view | alice 110 view edit | alice 111 view | alice 112 view
alice 113 view edit delete | alice 114 view | alice 115 view | alice 116 view | alice 117 view | alice 118 view
alice 119 view edit delete | alice 120 view
bob 101 view | bob 102 view edit delete | bob 103 view | bob 105 view | bob 108 view edit delete | bob 112 view
bob 114 view edit delete | bob 116 view | bob 117 view | bob 119 view | bob 120 view edit delete
carol 101 view | carol 102 view | carol 103 view edit delete | carol 105 view | carol 108 view
carol 109 view edit delete | carol 112 view | carol 115 view edit delete | carol 116 view | carol 117 view | carol 119 view
dan 101 view | dan 102 view | dan 103 view | dan 104 view edit delete | dan 105 view | dan 106 view | dan 107 view
dan 108 view | dan 109 view | dan 110 view edit delete | dan 111 view | dan 112 view | dan 113 view | dan 114 view
dan 115 view edit | dan 116 view edit delete | dan 117 view | dan 118 view | dan 119 view | dan 120 view
erin 105 view edit delete | erin 111 view edit delete | erin 115 view | erin 117 view edit delete
felix 104 view | felix 106 view edit delete | felix 109 view | felix 111 view | felix 112 view edit delete
felix 114 view | felix 118 view edit delete | felix 120 view`;

const rows = (table: string): string[][] =>
  table
    .split(/\n|\|/)
    .map((r) => r.trim())
    .filter(Boolean)
    .map((r) => r.split(/\s+/));

type Item = { type?: string; id?: string; name?: string };

/** The harness's comparison: both lists sorted (by type and id, or by name), then compared as JSON. */
function sameAsHarness(actual: Item[], expected: Item[]): boolean {
  const sort = (items: Item[]) =>
    [...items].sort((a, b) => (a.type ? a.type.localeCompare(b.type!) || a.id!.localeCompare(b.id!) : a.name!.localeCompare(b.name!)));
  return JSON.stringify(sort(actual)) === JSON.stringify(sort(expected));
}

let f: AuthzenFixture;

beforeAll(async () => {
  f = await serveExample(EXAMPLE, { client_id: 'search-pep', client_secret: 'search-pep-example-secret-change-me-0123456789' });
}, 60_000);
afterAll(async () => f?.server.stop());

describe('subject search: who can view, edit, delete record N', () => {
  for (const [record, action, ...people] of rows(SUBJECTS)) {
    it(`${action} ${record}: ${people.join(', ')}`, async () => {
      const res = await f.post('/access/v1/search/subject', { subject: { type: 'user' }, action: { name: action }, resource: { type: 'record', id: record } });
      expect(res.status).toBe(200);
      const expected = people.map((id) => ({ type: 'user', id }));
      expect(sameAsHarness(res.body.results, expected), JSON.stringify(res.body.results)).toBe(true);
    });
  }
});

describe('resource search: which records can P view, edit, delete', () => {
  for (const [person, action, ...records] of rows(RESOURCES)) {
    it(`${person} ${action}: ${records.length} records`, async () => {
      const res = await f.post('/access/v1/search/resource', { subject: { type: 'user', id: person }, action: { name: action }, resource: { type: 'record' } });
      expect(res.status).toBe(200);
      const expected = records.map((id) => ({ type: 'record', id }));
      expect(sameAsHarness(res.body.results, expected), JSON.stringify(res.body.results)).toBe(true);
    });
  }
});

describe('action search: which actions can P perform on record N', () => {
  const listed = new Map(rows(ACTIONS).map(([person, record, ...actions]) => [`${person} ${record}`, actions]));
  it('every person on every record (the pairs the table leaves out allow nothing)', async () => {
    const failures: string[] = [];
    expect([PROJECT.users.length, PROJECT.entities.length]).toEqual([6, 20]);
    for (const { id: person } of PROJECT.users) {
      for (const { id: record } of PROJECT.entities) {
        const res = await f.post('/access/v1/search/action', { subject: { type: 'user', id: person }, resource: { type: 'record', id: record } });
        const expected = (listed.get(`${person} ${record}`) ?? []).map((name) => ({ name }));
        if (res.status !== 200 || !sameAsHarness(res.body.results, expected)) failures.push(`${person} ${record}: ${JSON.stringify(res.body)}`);
      }
    }
    expect(failures).toEqual([]);
  });
});

describe('outside the dataset: a valid empty answer', () => {
  it('an unknown record, an unknown action, an unknown person', async () => {
    const unknownRecord = await f.post('/access/v1/search/subject', { subject: { type: 'user' }, action: { name: 'view' }, resource: { type: 'record', id: '999' } });
    expect([unknownRecord.status, unknownRecord.body]).toEqual([200, { results: [] }]);
    const unknownAction = await f.post('/access/v1/search/subject', { subject: { type: 'user' }, action: { name: 'print' }, resource: { type: 'record', id: '101' } });
    expect([unknownAction.status, unknownAction.body]).toEqual([200, { results: [] }]);
    const unknownPerson = await f.post('/access/v1/search/resource', { subject: { type: 'user', id: 'zoe' }, action: { name: 'view' }, resource: { type: 'record' } });
    expect([unknownPerson.status, unknownPerson.body]).toEqual([200, { results: [] }]);
  });
});
