import type { AppContext } from '../context.js';
import { sha256 } from '../crypto/hash.js';

/**
 * Thresholds for failed attempts (docs/sign-in.md lists them).
 * Counters live in the database so every process and instance shares them.
 */
export const LIMITS = {
  /** wrong passwords or codes for one account */
  account: { max: 5, windowSeconds: 15 * 60 },
  /** wrong passwords or codes from one address, over all accounts */
  address: { max: 20, windowSeconds: 15 * 60 },
  /** failed client authentications for one client from one address */
  client: { max: 10, windowSeconds: 5 * 60 },
} as const;

// Keys hold hashes, not emails or addresses.
const accountKey = (email: string) => `signin:acct:${sha256(email.trim().toLowerCase())}`;
const addressKey = (ip: string) => `signin:ip:${sha256(ip)}`;
const clientKey = (clientId: string, ip: string) => `client:${sha256(`${clientId}\n${ip}`)}`;

/** Failed sign-in attempts (password or second step) per account and per address. */
export function signInLimiter(ctx: AppContext) {
  const rl = ctx.store.rateLimits;
  return {
    async blocked(email: string, ip: string): Promise<boolean> {
      return (
        (await rl.count(accountKey(email), LIMITS.account.windowSeconds)) >= LIMITS.account.max ||
        (await rl.count(addressKey(ip), LIMITS.address.windowSeconds)) >= LIMITS.address.max
      );
    },
    async fail(email: string, ip: string): Promise<void> {
      await rl.hit(accountKey(email), LIMITS.account.windowSeconds);
      await rl.hit(addressKey(ip), LIMITS.address.windowSeconds);
    },
    /** A success clears the account's counter (not the address's). */
    async succeed(email: string): Promise<void> {
      await rl.clear(accountKey(email));
    },
  };
}

/** Failed client authentications at the token, introspection and revocation endpoints. */
export function clientAuthLimiter(ctx: AppContext) {
  const rl = ctx.store.rateLimits;
  return {
    blocked: async (clientId: string, ip: string): Promise<boolean> =>
      (await rl.count(clientKey(clientId, ip), LIMITS.client.windowSeconds)) >= LIMITS.client.max,
    fail: async (clientId: string, ip: string): Promise<void> => {
      await rl.hit(clientKey(clientId, ip), LIMITS.client.windowSeconds);
    },
  };
}
