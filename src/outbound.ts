import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { Readable } from 'node:stream';

/**
 * Addresses an outbound fetch never reaches unless the configuration allows private ones:
 * loopback, private, link-local, carrier-grade NAT, unspecified, multicast and reserved
 * ranges (IPv4 and IPv6, and IPv4 written inside IPv6). A URL given by an administrator or
 * a caller must not become a way to read the host's own network.
 */
const NOT_PUBLIC = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) NOT_PUBLIC.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96]] as const) NOT_PUBLIC.addSubnet(net, bits, 'ipv6');

export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return !NOT_PUBLIC.check(mapped[1]!, 'ipv4');
    return !NOT_PUBLIC.check(address, 'ipv6');
  }
  return !NOT_PUBLIC.check(address, 'ipv4');
}

export class OutboundRefused extends Error {
  override name = 'OutboundRefused';
}

/**
 * Why `url` may not be fetched, or undefined: http(s) only, and (unless allowed) every address
 * the host resolves to public. `unresolved: 'accept'` lets a name that does not resolve now pass
 * (a destination saved for later, checked again at each connection).
 */
export async function outboundProblem(url: string, allowPrivate: boolean, opts: { unresolved?: 'refuse' | 'accept' } = {}): Promise<string | undefined> {
  if (!URL.canParse(url)) return 'not a URL';
  const u = new URL(url);
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return 'only http and https URLs are fetched';
  if (u.username || u.password) return 'a URL with credentials is not fetched';
  if (allowPrivate) return undefined;
  const host = u.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((a) => a.address);
  } catch {
    return opts.unresolved === 'accept' ? undefined : `${host} does not resolve`;
  }
  if (addresses.length === 0 || !addresses.every(isPublicAddress)) return `${host} is not a public address (loopback, private and link-local addresses are refused)`;
  return undefined;
}

/**
 * The DNS lookup of an outbound connection: the addresses it connects to are the ones checked
 * (a host that resolves to a public address when checked and to a private one when connecting
 * gets no second chance).
 */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 4);
      const list = addresses as unknown as LookupAddress[];
      if (!allowPrivate && (list.length === 0 || !list.every((a) => isPublicAddress(a.address)))) {
        return callback(new OutboundRefused(`${hostname} is not a public address (loopback, private and link-local addresses are refused)`), '', 4);
      }
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
      callback(null, list[0]!.address, list[0]!.family);
    });
  };
}

/**
 * GET a JSON document under the outbound rules: no redirects followed, a 5-second limit, at
 * most 256 KiB. Throws OutboundRefused (with the reason) for anything else.
 */
export async function fetchJson(url: string, opts: { allowPrivate: boolean; timeoutMs?: number; maxBytes?: number }): Promise<unknown> {
  const problem = await outboundProblem(url, opts.allowPrivate);
  if (problem) throw new OutboundRefused(problem);
  const max = opts.maxBytes ?? 256 * 1024;
  const text = await new Promise<string>((resolve, reject) => {
    const request = url.startsWith('https:') ? httpsRequest : httpRequest;
    const req = request(url, { method: 'GET', headers: { accept: 'application/json' }, lookup: guardedLookup(opts.allowPrivate) }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        return reject(new OutboundRefused(`answered ${res.statusCode ?? 'nothing'}`));
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > max) req.destroy(new OutboundRefused('the document is too large'));
        else chunks.push(c);
      });
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', reject);
    });
    req.setTimeout(opts.timeoutMs ?? 5000, () => req.destroy(new OutboundRefused('no answer in time')));
    req.on('error', (err) => reject(err instanceof OutboundRefused ? err : new OutboundRefused(`the fetch failed: ${err.message}`)));
    req.end();
  });
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new OutboundRefused('the document is not JSON');
  }
}

/** The outbound settings that decide whether a destination may be private. */
export interface OutboundSettings {
  outboundAllowPrivate: boolean;
  outboundAllowHosts: string[];
}

/** Whether `url` may reach a loopback, private or link-local address: allowed everywhere, or for its host (host or host:port). */
export function mayReachPrivate(settings: OutboundSettings, url: string | URL): boolean {
  if (settings.outboundAllowPrivate) return true;
  if (!URL.canParse(String(url))) return false;
  const u = new URL(String(url));
  return settings.outboundAllowHosts.includes(u.host.toLowerCase()) || settings.outboundAllowHosts.includes(u.hostname.toLowerCase());
}

/** Statuses whose answer has no body (a Response refuses one). */
const NULL_BODY = new Set([101, 204, 205, 304]);

/**
 * A fetch under the outbound rules, for pushes and upstream calls: http(s) only, every address
 * the host resolves to checked at connection time (unless the destination may be private),
 * redirects never followed (a 3xx is answered as it is). The body of a request is a string or
 * absent; the answer's body streams. A refused destination rejects with OutboundRefused.
 */
export function outboundFetch(settings: OutboundSettings): (url: string | URL, init?: RequestInit) => Promise<Response> {
  return async (input, init = {}) => {
    const url = String(input);
    const allowPrivate = mayReachPrivate(settings, url);
    const problem = await outboundProblem(url, allowPrivate);
    if (problem) throw new OutboundRefused(problem);
    if (init.body !== undefined && init.body !== null && typeof init.body !== 'string') throw new TypeError('outboundFetch sends string bodies only');
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => (headers[name] = value));
    const body = init.body ?? undefined;
    if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
    const signal = init.signal ?? undefined;
    signal?.throwIfAborted();
    return new Promise<Response>((resolve, reject) => {
      const request = url.startsWith('https:') ? httpsRequest : httpRequest;
      const req = request(url, { method: init.method ?? 'GET', headers, lookup: guardedLookup(allowPrivate), signal }, (res) => {
        const status = res.statusCode ?? 502;
        const out = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          if (value === undefined) continue;
          for (const v of Array.isArray(value) ? value : [value]) out.append(name, v);
        }
        if (NULL_BODY.has(status)) {
          res.resume();
          return resolve(new Response(null, { status, headers: out }));
        }
        resolve(new Response(Readable.toWeb(res) as ReadableStream<Uint8Array>, { status, statusText: res.statusMessage ?? '', headers: out }));
      });
      req.on('error', (err) => reject(err));
      req.end(body);
    });
  };
}
