import { afterAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** GET /metrics takes a bearer token (its own, or the management API's) unless configured open. */

const METRICS_TOKEN = 'metrics-token-0123456789abcdef-0123456789';
const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop();
});

const scrape = (s: TestServer, token?: string) => fetch(`${s.url}/metrics`, token ? { headers: { authorization: `Bearer ${token}` } } : {});

describe('/metrics', () => {
  it('answers 401 without a token or with a wrong one, and the metrics to either token', async () => {
    const s = await startTestServer({ env: { GATEHOUSE_METRICS_TOKEN: METRICS_TOKEN } });
    servers.push(s);
    for (const token of [undefined, 'wrong-token-0123456789abcdef-0123456789']) {
      const refused = await scrape(s, token);
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toBe('Bearer');
      expect(((await refused.json()) as { error: string }).error).toBe('invalid_token');
    }
    for (const token of [METRICS_TOKEN, s.adminToken]) {
      const ok = await scrape(s, token);
      expect(ok.status).toBe(200);
      expect(await ok.text()).toMatch(/^# TYPE gatehouse_decisions_total counter$/m);
    }
    // /healthz stays open.
    expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
  });

  it('is open to anyone with GATEHOUSE_METRICS_OPEN=true', async () => {
    const s = await startTestServer({ env: { GATEHOUSE_METRICS_OPEN: 'true' } });
    servers.push(s);
    expect((await scrape(s)).status).toBe(200);
  });

  it('a metrics token shorter than 32 characters is refused at start', async () => {
    await expect(startTestServer({ env: { GATEHOUSE_METRICS_TOKEN: 'short' } })).rejects.toThrow(/^GATEHOUSE_METRICS_TOKEN: must be at least 32 characters/);
  });
});
