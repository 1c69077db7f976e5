import { errors } from '../errors.js';

/** A unique-constraint failure (another worker won a race the pre-check could not see) as a 409. */
export function onDuplicate<T>(message: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    const code = (err as { code?: unknown })?.code;
    if (code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE') throw errors.conflict(message);
    throw err;
  }
}

/** A delete that other records still point at (without a cascade) as a 409 naming the way out. */
export function onStillReferenced<T>(message: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if ((err as { code?: unknown })?.code === 'SQLITE_CONSTRAINT_FOREIGNKEY') throw errors.conflict(message);
    throw err;
  }
}
