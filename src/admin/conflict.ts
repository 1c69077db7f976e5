import { errors } from '../errors.js';
import { isForeignKeyViolation, isUniqueViolation } from '../store/sql.js';

/** A unique-constraint failure (another process won a race the pre-check could not see) as a 409. */
export async function onDuplicate<T>(message: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isUniqueViolation(err)) throw errors.conflict(message);
    throw err;
  }
}

/** A delete that other records still point at (without a cascade) as a 409 naming the way out. */
export async function onStillReferenced<T>(message: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isForeignKeyViolation(err)) throw errors.conflict(message);
    throw err;
  }
}
