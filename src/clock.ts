/** The one clock decisions, tokens and approvals read: milliseconds since the Unix epoch. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** The clock's time in whole seconds: the unit of tokens, sessions and the store. */
export const nowSeconds = (clock: Clock): number => Math.floor(clock.now() / 1000);

/** Unix seconds as the ISO 8601 strings of the management API, the console and the audit trail (null stays null). */
export function iso(t: number): string;
export function iso(t: number | null | undefined): string | null;
export function iso(t: number | null | undefined): string | null {
  return t == null ? null : new Date(t * 1000).toISOString();
}
