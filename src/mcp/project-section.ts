import type { z } from 'zod';
import type { AppContext } from '../context.js';
import { openHeaders, putUpstream, upstreamCreateSchema, DEFAULT_TIMEOUT_MS } from './upstream-config.js';

type UpstreamItem = z.output<typeof upstreamCreateSchema>;

/**
 * The project file's `mcp_upstreams` section: a list of upstreams as `POST /mcp/upstreams`
 * takes them, found by name, created when absent and replaced when they differ (an
 * unchanged one is left alone, so a restart changes nothing).
 */
export const mcpUpstreamsSection = {
  key: 'mcp_upstreams',
  item: upstreamCreateSchema,
  async apply(ctx: AppContext, items: UpstreamItem[]): Promise<void> {
    for (const u of items) {
      const cur = await ctx.store.mcp.get(u.name);
      const same =
        cur !== undefined &&
        cur.url === u.url &&
        cur.timeout_ms === (u.timeout_ms ?? DEFAULT_TIMEOUT_MS) &&
        JSON.stringify(cur.tools) === JSON.stringify(u.tools ?? {}) &&
        JSON.stringify(openHeaders(ctx, cur.headers_sealed)) === JSON.stringify(u.headers ?? {});
      if (!same) await putUpstream(ctx, u.name, { ...u, headers: u.headers ?? null });
    }
  },
};
