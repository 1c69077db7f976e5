import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchJson, isPublicAddress, outboundProblem } from '../../src/outbound.js';

let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/jwks') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"keys":[]}');
    if (req.url === '/moved') return void res.writeHead(302, { location: '/jwks' }).end();
    if (req.url === '/big') return void res.writeHead(200).end(`{"x":"${'a'.repeat(300 * 1024)}"}`);
    if (req.url === '/html') return void res.writeHead(200).end('<html>');
    if (req.url === '/slow') return void setTimeout(() => res.writeHead(200).end('{}'), 1000);
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe('outbound address rules', () => {
  it('tells public addresses from the others', () => {
    for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111']) expect(isPublicAddress(a), a).toBe(true);
    for (const a of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', '::', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', 'not an address']) {
      expect(isPublicAddress(a), a).toBe(false);
    }
  });

  it('refuses loopback hosts and other schemes unless private addresses are allowed', async () => {
    expect(await outboundProblem(`${base}/jwks`, false)).toContain('not a public address');
    expect(await outboundProblem('http://localhost:9/jwks', false)).toContain('not a public address');
    expect(await outboundProblem('http://[::1]:9/jwks', false)).toContain('not a public address');
    expect(await outboundProblem('ftp://example.com/jwks', true)).toContain('http and https');
    expect(await outboundProblem('https://user:pw@example.com/jwks', true)).toContain('credentials');
    expect(await outboundProblem(`${base}/jwks`, true)).toBeUndefined();
  });

  it('fetches JSON and nothing else: no redirect, no large or non-JSON document, no endless wait', async () => {
    await expect(fetchJson(`${base}/jwks`, { allowPrivate: false })).rejects.toThrow('not a public address');
    expect(await fetchJson(`${base}/jwks`, { allowPrivate: true })).toEqual({ keys: [] });
    await expect(fetchJson(`${base}/moved`, { allowPrivate: true })).rejects.toThrow('answered 302');
    await expect(fetchJson(`${base}/big`, { allowPrivate: true })).rejects.toThrow('too large');
    await expect(fetchJson(`${base}/html`, { allowPrivate: true })).rejects.toThrow('not JSON');
    await expect(fetchJson(`${base}/slow`, { allowPrivate: true, timeoutMs: 200 })).rejects.toThrow('no answer in time');
  });
});
