/** Helpers shared by the store modules. */
import type { Clock } from '../clock.js';

/** Whole seconds since the epoch on `clock`: the unit the store keeps its times in. */
export const secondsOf = (clock: Clock): number => Math.floor(clock.now() / 1000);

export function parseJson<T>(text: string | null | undefined, fallback: T): T {
  if (text == null) return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback;
  }
}

export const bool = (v: unknown): boolean => v === 1 || v === true;
