import type { Recorder } from '../admin/audit.js';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import type { Store } from '../store/index.js';
import type { Person } from './session.js';

/** One change made in the console, as its audit record says it: `console.<area>.<verb>`, the target and the details that matter. */
export interface Change {
  action: string;
  target: string | null;
  /** chosen by each caller: never a secret */
  details?: Record<string, unknown>;
  /** the agent or person the change is about, for the trail's filters */
  about?: { agent_id?: string; user_id?: string };
}

/** Appends the record of `change` made by `person` (their user id is the `actor`) with `store`. */
export async function appendChange(store: Store, person: Person, change: Change): Promise<void> {
  await store.audit.append({
    kind: 'admin',
    actor: person.user.id,
    action: `console.${change.action}`,
    resource: change.target,
    context: change.details ?? {},
    agent_id: change.about?.agent_id ?? null,
    user_id: change.about?.user_id ?? null,
  });
}

export const NOT_RECORDED = 'The change could not be written to the audit trail, so it was not made. Try again; the server log says why.';

/**
 * The audit step a console write hands to the management function that makes the change: that
 * function runs it in its own transaction, so the change and its record land together or not
 * at all. A record that cannot be written undoes the change and is answered as a 503 the page
 * explains (the database's error code stays on it, so a PostgreSQL transaction that lost a
 * serialization check is still run again).
 */
export function audited<T = void>(ctx: AppContext, person: Person, describe: (result: T) => Change): Recorder<T> {
  return async (tx, result) => {
    const change = describe(result);
    try {
      await appendChange(tx, person, change);
    } catch (err) {
      ctx.logger.error({ err, action: `console.${change.action}` }, 'console change not recorded: undone');
      throw Object.assign(errors.temporarilyUnavailable(NOT_RECORDED), { code: (err as { code?: unknown } | null)?.code });
    }
  };
}
