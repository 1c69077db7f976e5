/** Helpers shared by the store modules. */

/** Whole seconds since the epoch on a clock: the unit the store keeps its times in (the clock's own helper). */
export { nowSeconds as secondsOf } from '../clock.js';

export function parseJson<T>(text: string | null | undefined, fallback: T): T {
  if (text == null) return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback;
  }
}

export const bool = (v: unknown): boolean => v === 1 || v === true;
