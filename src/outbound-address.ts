import { BlockList, isIP } from 'node:net';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';

/**
 * The outbound address rule: a URL a client or a document names is fetched only from a public
 * address. Loopback, private (RFC 1918, unique local), link-local, carrier-grade NAT,
 * unspecified, multicast, documentation and benchmarking ranges are refused (IPv4-mapped IPv6
 * forms too), unless `allowPrivate` (NODE_ENV=development). The rule is applied to the
 * addresses DNS answers at connection time, so a name that resolves to a private address is
 * refused as well as a literal one, and a second resolution cannot slip past it.
 */
const NON_PUBLIC = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24],
  ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) NON_PUBLIC.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['2001:db8::', 32], ['64:ff9b::', 96], ['100::', 64],
] as const) NON_PUBLIC.addSubnet(net, prefix, 'ipv6');

/** Whether `address` (an IP literal) is a public one. */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return !NON_PUBLIC.check(address, 'ipv4');
  if (family !== 6) return false;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return isPublicAddress(mapped[1]!);
  return !NON_PUBLIC.check(address, 'ipv6');
}

export class OutboundAddressError extends Error {
  constructor(readonly host: string, readonly address: string) {
    super(`${host} resolves to ${address}, which is not a public address`);
    this.name = 'OutboundAddressError';
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for http(s).request / net.connect that resolves as usual and refuses the
 * connection when any address answered is not public (unless `allowPrivate`).
 */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: object, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const list = addresses as LookupAddress[];
      const refused = allowPrivate ? undefined : list.find((a) => !isPublicAddress(a.address));
      if (refused) return callback(new OutboundAddressError(hostname, refused.address) as NodeJS.ErrnoException, []);
      if ((options as { all?: boolean }).all) return callback(null, list);
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), []);
      callback(null, first.address, first.family);
    });
  };
}

/** Whether a URL's host, when it is an IP literal, is refused (a quick answer before any connection). */
export function literalHostRefused(url: URL, allowPrivate: boolean): boolean {
  if (allowPrivate) return false;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) === 0) return host === 'localhost' || host.endsWith('.localhost');
  return !isPublicAddress(host);
}
