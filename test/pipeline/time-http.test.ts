import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { createRule, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';
import { ask, autonomousToken, decisionsOf, said, TestClock } from './clocked-agents.js';

// Rules that read the clock, in the time zone of their file, asked through the decision
// endpoint with the server's clock held at instants on both sides of daylight-saving changes
// (Europe/Berlin: 2026-03-29 and 2026-10-25 at 01:00 UTC; America/New_York: 2026-03-08 at
// 07:00 UTC and 2026-11-01 at 06:00 UTC).

const BERLIN = `policy "berlin" version 1
timezone "Europe/Berlin"

rule "berlin-small-hours" {
  effect deny
  subjects "agent:*"
  relation "open:doors"
  object "door:berlin"
  when time.hour < 3
}

rule "berlin-out-of-hours" {
  effect require_approval
  subjects "agent:*"
  relation "create:refunds"
  object "refund:berlin"
  when time.weekday in ["sat", "sun"] or time.hour < 8 or time.hour >= 18
}

rule "berlin-no-sunday-deliveries" {
  effect deny
  subjects "agent:*"
  relation "create:deliveries"
  object "delivery:berlin"
  when time.weekday == "sun"
}

rule "berlin-change-day" {
  effect deny
  subjects "agent:*"
  relation "read:calendars"
  object "calendar:berlin"
  when time.date == "2026-03-29"
}
`;

const NEW_YORK = `policy "new-york" version 1
timezone "America/New_York"

rule "new-york-small-hours" {
  effect deny
  subjects "agent:*"
  relation "open:doors"
  object "door:new-york"
  when time.hour < 3
}

rule "new-york-out-of-hours" {
  effect require_approval
  subjects "agent:*"
  relation "create:refunds"
  object "refund:new-york"
  when time.weekday in ["sat", "sun"] or time.hour < 8 or time.hour >= 18
}

rule "new-york-second-half-of-one" {
  effect deny
  subjects "agent:*"
  relation "read:calendars"
  object "calendar:new-york"
  when time.hour == 1 and time.minute >= 30
}
`;

// No timezone: UTC.
const UTC = `policy "utc" version 1

rule "utc-change-day" {
  effect deny
  subjects "agent:*"
  relation "read:calendars"
  object "calendar:utc"
  when time.date == "2026-03-29"
}

rule "archive-closes" {
  effect deny
  subjects "agent:*"
  relation "read:archives"
  object "archive:*"
  when time.epoch >= 1798761600
}
`;

const ACTIONS = ['open:doors', 'create:refunds', 'create:deliveries', 'read:calendars', 'read:archives'];

const clock = new TestClock('2026-03-27T12:00:00Z');
let s: TestServer;
let agent: TestAgent;

beforeAll(async () => {
  s = await startTestServer({ clock: clock.clock, policies: { 'berlin.policy': BERLIN, 'new-york.policy': NEW_YORK, 'utc.policy': UTC } });
  await putRole(s, 'clerk', ACTIONS);
  agent = await registerAgent(s, { name: 'clerk', mode: 'autonomous', roles: ['clerk'], capabilities: ACTIONS.map((name) => ({ name })) });
});
afterAll(() => s?.stop());

/** The decision at an instant: the clock is set there, the agent signs in and asks. */
async function at(iso: string, action: string, resource: string): Promise<string> {
  clock.set(iso);
  const token = await autonomousToken(s, clock, agent);
  return said(await ask(s, agent, token, action, resource));
}

describe('Europe/Berlin across daylight saving', () => {
  it('spring forward, 2026-03-29: 01:59:59 CET is followed by 03:00 CEST', async () => {
    const door = (iso: string) => at(iso, 'open:doors', 'door:berlin');
    expect(await door('2026-03-28T01:00:00Z')).toBe('deny rule_denied: berlin-small-hours'); // 02:00 CET
    expect(await door('2026-03-28T02:00:00Z')).toBe('allow allowed'); // 03:00 CET
    expect(await door('2026-03-29T00:59:59Z')).toBe('deny rule_denied: berlin-small-hours'); // 01:59:59 CET
    expect(await door('2026-03-29T01:00:00Z')).toBe('allow allowed'); // 03:00 CEST
  });

  it('fall back, 2026-10-25: the hour from 02:00 comes twice', async () => {
    const door = (iso: string) => at(iso, 'open:doors', 'door:berlin');
    expect(await door('2026-10-24T01:00:00Z')).toBe('allow allowed'); // 03:00 CEST
    expect(await door('2026-10-25T00:30:00Z')).toBe('deny rule_denied: berlin-small-hours'); // 02:30 CEST
    expect(await door('2026-10-25T01:30:00Z')).toBe('deny rule_denied: berlin-small-hours'); // 02:30 CET
    expect(await door('2026-10-25T01:59:59Z')).toBe('deny rule_denied: berlin-small-hours'); // 02:59:59 CET
    expect(await door('2026-10-25T02:00:00Z')).toBe('allow allowed'); // 03:00 CET
  });

  it('office hours, weekdays only, in local time whatever the offset', async () => {
    const refund = (iso: string) => at(iso, 'create:refunds', 'refund:berlin');
    const wait = 'approval_required approval_required: berlin-out-of-hours';
    expect(await refund('2026-03-27T16:59:00Z')).toBe('allow allowed'); // Fri 17:59 CET
    expect(await refund('2026-03-27T17:00:00Z')).toBe(wait); // Fri 18:00 CET
    expect(await refund('2026-03-28T12:00:00Z')).toBe(wait); // Sat 13:00
    expect(await refund('2026-03-30T05:59:00Z')).toBe(wait); // Mon 07:59 CEST
    expect(await refund('2026-03-30T06:00:00Z')).toBe('allow allowed'); // Mon 08:00 CEST
    expect(await refund('2026-03-30T15:59:00Z')).toBe('allow allowed'); // Mon 17:59 CEST
    expect(await refund('2026-03-30T16:00:00Z')).toBe(wait); // Mon 18:00 CEST
    expect(await refund('2026-10-26T06:59:00Z')).toBe(wait); // Mon 07:59 CET
    expect(await refund('2026-10-26T07:00:00Z')).toBe('allow allowed'); // Mon 08:00 CET

    const [record] = await decisionsOf(s, agent.id, 1);
    expect(record).toMatchObject({ action: 'create:refunds', resource: 'refund:berlin', decision: 'allow', reason: 'allowed', time: '2026-10-26T07:00:00.000Z' });
  });

  it('the weekday and the date are Berlin’s, not UTC’s', async () => {
    const deliver = (iso: string) => at(iso, 'create:deliveries', 'delivery:berlin');
    expect(await deliver('2026-03-28T22:59:00Z')).toBe('allow allowed'); // Sat 23:59 CET
    expect(await deliver('2026-03-28T23:30:00Z')).toBe('deny rule_denied: berlin-no-sunday-deliveries'); // Sun 00:30 CET, Sat in UTC
    expect(await deliver('2026-03-29T21:59:00Z')).toBe('deny rule_denied: berlin-no-sunday-deliveries'); // Sun 23:59 CEST
    expect(await deliver('2026-03-29T22:00:00Z')).toBe('allow allowed'); // Mon 00:00 CEST, Sun in UTC

    expect(await at('2026-03-28T23:30:00Z', 'read:calendars', 'calendar:berlin')).toBe('deny rule_denied: berlin-change-day');
    expect(await at('2026-03-28T23:30:00Z', 'read:calendars', 'calendar:utc')).toBe('allow allowed');
    expect(await at('2026-03-29T22:30:00Z', 'read:calendars', 'calendar:berlin')).toBe('allow allowed');
    expect(await at('2026-03-29T22:30:00Z', 'read:calendars', 'calendar:utc')).toBe('deny rule_denied: utc-change-day');
  });
});

describe('America/New_York across daylight saving', () => {
  it('spring forward, 2026-03-08: 01:59:59 EST is followed by 03:00 EDT', async () => {
    const door = (iso: string) => at(iso, 'open:doors', 'door:new-york');
    expect(await door('2026-03-07T07:00:00Z')).toBe('deny rule_denied: new-york-small-hours'); // 02:00 EST
    expect(await door('2026-03-08T06:59:59Z')).toBe('deny rule_denied: new-york-small-hours'); // 01:59:59 EST
    expect(await door('2026-03-08T07:00:00Z')).toBe('allow allowed'); // 03:00 EDT
  });

  it('fall back, 2026-11-01: the hour from 01:00 comes twice', async () => {
    const door = (iso: string) => at(iso, 'open:doors', 'door:new-york');
    expect(await door('2026-10-31T07:00:00Z')).toBe('allow allowed'); // 03:00 EDT
    expect(await door('2026-11-01T07:00:00Z')).toBe('deny rule_denied: new-york-small-hours'); // 02:00 EST
    expect(await door('2026-11-01T08:00:00Z')).toBe('allow allowed'); // 03:00 EST

    const calendar = (iso: string) => at(iso, 'read:calendars', 'calendar:new-york');
    expect(await calendar('2026-11-01T05:29:00Z')).toBe('allow allowed'); // 01:29 EDT
    expect(await calendar('2026-11-01T05:30:00Z')).toBe('deny rule_denied: new-york-second-half-of-one'); // 01:30 EDT
    expect(await calendar('2026-11-01T06:00:00Z')).toBe('allow allowed'); // 01:00 EST
    expect(await calendar('2026-11-01T06:30:00Z')).toBe('deny rule_denied: new-york-second-half-of-one'); // 01:30 EST
    expect(await calendar('2026-11-01T07:00:00Z')).toBe('allow allowed'); // 02:00 EST
  });

  it('office hours in New York local time', async () => {
    const refund = (iso: string) => at(iso, 'create:refunds', 'refund:new-york');
    const wait = 'approval_required approval_required: new-york-out-of-hours';
    expect(await refund('2026-03-06T22:59:00Z')).toBe('allow allowed'); // Fri 17:59 EST
    expect(await refund('2026-03-06T23:00:00Z')).toBe(wait); // Fri 18:00 EST
    expect(await refund('2026-03-09T11:59:00Z')).toBe(wait); // Mon 07:59 EDT
    expect(await refund('2026-03-09T12:00:00Z')).toBe('allow allowed'); // Mon 08:00 EDT
    expect(await refund('2026-10-30T21:59:00Z')).toBe('allow allowed'); // Fri 17:59 EDT
    expect(await refund('2026-10-30T22:30:00Z')).toBe(wait); // Fri 18:30 EDT
    expect(await refund('2026-11-06T22:30:00Z')).toBe('allow allowed'); // Fri 17:30 EST
    expect(await refund('2026-11-01T15:00:00Z')).toBe(wait); // Sun 10:00 EST
    // The same instant, two zones: Berlin's office is closed, New York's open.
    expect(await at('2026-11-06T18:00:00Z', 'create:refunds', 'refund:berlin')).toBe('approval_required approval_required: berlin-out-of-hours');
    expect(await at('2026-11-06T18:00:00Z', 'create:refunds', 'refund:new-york')).toBe('allow allowed');
  });
});

describe('a file’s time zone changed and reloaded', () => {
  it('applies to the next decision, without a restart', async () => {
    const door = () => at('2026-06-10T00:30:00Z', 'open:doors', 'door:berlin'); // 02:30 in Berlin, 20:30 the day before in New York
    expect(await door()).toBe('deny rule_denied: berlin-small-hours');
    writeFileSync(join(s.policyDir, 'berlin.policy'), BERLIN.replace('timezone "Europe/Berlin"', 'timezone "America/New_York"').replace('version 1', 'version 2'));
    const reloaded = await s.admin('POST', '/policy/reload');
    expect(reloaded.status, JSON.stringify(reloaded.body)).toBe(200);
    expect(await door()).toBe('allow allowed');
    writeFileSync(join(s.policyDir, 'berlin.policy'), BERLIN);
    expect((await s.admin('POST', '/policy/reload')).status).toBe(200);
    expect(await door()).toBe('deny rule_denied: berlin-small-hours');
  });

  it('an unknown zone is refused and the policy in force stays', async () => {
    writeFileSync(join(s.policyDir, 'berlin.policy'), BERLIN.replace('timezone "Europe/Berlin"', 'timezone "Europe/Atlantis"'));
    const refused = await s.admin('POST', '/policy/reload');
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain('Europe/Atlantis');
    writeFileSync(join(s.policyDir, 'berlin.policy'), BERLIN);
    expect(await at('2026-06-10T00:30:00Z', 'open:doors', 'door:berlin')).toBe('deny rule_denied: berlin-small-hours');
  });
});

describe('epoch, and rules without a time zone', () => {
  it('time.epoch is whole seconds since 1970', async () => {
    expect(await at('2026-12-31T23:59:59Z', 'read:archives', 'archive:a1')).toBe('allow allowed');
    expect(await at('2027-01-01T00:00:00Z', 'read:archives', 'archive:a1')).toBe('deny rule_denied: archive-closes');
  });

  it('a management API rule reads time in UTC', async () => {
    const id = await createRule(s, {
      name: 'no-deliveries-after-ten-utc',
      effect: 'deny',
      subjects: ['agent:*'],
      relation: 'create:deliveries',
      object: 'delivery:*',
      condition: { expr: 'time.hour >= 22' },
    });
    expect(await at('2026-06-10T21:59:00Z', 'create:deliveries', 'delivery:hamburg')).toBe('allow allowed');
    expect(await at('2026-06-10T22:00:00Z', 'create:deliveries', 'delivery:hamburg')).toBe('deny rule_denied: no-deliveries-after-ten-utc');
    const [record] = await decisionsOf(s, agent.id, 1);
    expect(record).toMatchObject({ resource: 'delivery:hamburg', decision: 'deny', reason: 'rule_denied: no-deliveries-after-ten-utc', time: '2026-06-10T22:00:00.000Z' });
    expect((await s.admin('POST', `/rules/${id}/disable`)).status).toBe(200);
  });
});
