import type { AppContext } from '../context.js';
import { connectionCreate, createConnection, replaceConnection, type ConnectionCreate } from './connections.js';

/**
 * The project file's `saml_connections` section: connections as `POST /saml/connections` takes
 * them, found by name, created when absent and replaced otherwise (the same fields give the same row).
 */
export const samlConnectionsSection = {
  key: 'saml_connections',
  item: connectionCreate,
  apply(ctx: AppContext, items: ConnectionCreate[]): void {
    for (const c of items) {
      if (ctx.store.saml.get(c.name)) replaceConnection(ctx, c.name, c);
      else createConnection(ctx, c);
    }
  },
};
