import type { AppContext } from '../context.js';
import { connectionCreate, createConnection, replaceConnection, type ConnectionCreate } from './connections.js';

/**
 * The project file's `saml_connections` section: connections as `POST /saml/connections` takes
 * them, found by name, created when absent and replaced otherwise (the same fields give the same row).
 */
export const samlConnectionsSection = {
  key: 'saml_connections',
  item: connectionCreate,
  async apply(ctx: AppContext, items: ConnectionCreate[]): Promise<void> {
    for (const c of items) {
      if (await ctx.store.saml.get(c.name)) await replaceConnection(ctx, c.name, c);
      else await createConnection(ctx, c);
    }
  },
};
