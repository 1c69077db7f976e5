/** The one clock decisions, tokens and approvals read: milliseconds since the Unix epoch. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** The clock's time in whole seconds: the unit of tokens, sessions and the store. */
export const nowSeconds = (clock: Clock): number => Math.floor(clock.now() / 1000);
