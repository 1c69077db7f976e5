import { createApplication, updateApplication } from '../admin/applications.js';
import type { AppContext } from '../context.js';
import { ProtocolError } from '../errors.js';
import { builtInApplicationProblem, CONSOLE_CLIENT_ID, consoleApplicationShape } from '../oauth/built-in-applications.js';

/**
 * Makes the console's application exist with its one allowed shape, at every start: the
 * issuer may have changed since the last one, and with it the redirect URI. Idempotent; a
 * second instance starting at the same moment finds the first one's application.
 */
export async function ensureConsoleApplication(ctx: AppContext): Promise<void> {
  const shape = consoleApplicationShape(ctx.urls.issuer);
  const cur = await ctx.store.applications.get(CONSOLE_CLIENT_ID);
  if (cur && cur.type !== shape.type) {
    // Only an application made by hand before the console existed can have another type.
    ctx.logger.warn({ client_id: CONSOLE_CLIENT_ID }, 'replacing an application that used the console client_id');
    await ctx.store.transaction(async (tx) => {
      await tx.applications.delete(CONSOLE_CLIENT_ID);
      await tx.settings.bump('applications');
    });
  } else if (cur) {
    if (builtInApplicationProblem(ctx, CONSOLE_CLIENT_ID, cur)) await updateApplication(ctx, CONSOLE_CLIENT_ID, shape);
    return;
  }
  try {
    await createApplication(ctx, { name: 'Gatehouse console', client_id: CONSOLE_CLIENT_ID, ...shape });
  } catch (err) {
    // Another instance made it between our read and our write: theirs has the same shape.
    if (!(err instanceof ProtocolError && err.status === 409)) throw err;
  }
}
