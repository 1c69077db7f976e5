import type { Db } from './db.js';
import { now, parseJson } from './util.js';

/** How one upstream tool becomes an action on a resource with a context (all optional: defaults apply). */
export interface ToolMapping {
  action?: string;
  resource?: string;
  resource_from_argument?: { kind: string; argument: string };
  /** context field → argument name, or `{ value }` for a constant; absent = all the arguments */
  context?: Record<string, string | { argument: string } | { value: unknown }>;
}

export interface McpUpstreamRow {
  name: string;
  url: string;
  /** the extra request headers as JSON, sealed with the secret box; null when none */
  headers_sealed: string | null;
  timeout_ms: number;
  tools: Record<string, ToolMapping>;
  created_at: number;
  updated_at: number;
}
interface Row extends Omit<McpUpstreamRow, 'tools'> { tools: string }

export type McpUpstreamFields = Omit<McpUpstreamRow, 'created_at' | 'updated_at'>;

const toUpstream = (r: Row): McpUpstreamRow => ({ ...r, tools: parseJson(r.tools, {}) });

/** The upstream MCP servers of the gateway. Callers bump the `mcp` change counter on writes. */
export function mcpStore(db: Db) {
  const insert = db.prepare(
    `INSERT INTO mcp_upstreams (name, url, headers_sealed, timeout_ms, tools, created_at, updated_at)
     VALUES (@name, @url, @headers_sealed, @timeout_ms, @tools, @t, @t)`,
  );
  const upsert = db.prepare(
    `INSERT INTO mcp_upstreams (name, url, headers_sealed, timeout_ms, tools, created_at, updated_at)
     VALUES (@name, @url, @headers_sealed, @timeout_ms, @tools, @t, @t)
     ON CONFLICT (name) DO UPDATE SET url = excluded.url, headers_sealed = excluded.headers_sealed,
       timeout_ms = excluded.timeout_ms, tools = excluded.tools, updated_at = excluded.updated_at`,
  );
  const byName = db.prepare<[string], Row>('SELECT * FROM mcp_upstreams WHERE name = ?');
  const list = db.prepare<[], Row>('SELECT * FROM mcp_upstreams ORDER BY name');
  const del = db.prepare('DELETE FROM mcp_upstreams WHERE name = ?');
  const params = (f: McpUpstreamFields) => ({ ...f, tools: JSON.stringify(f.tools), t: now() });

  return {
    /** Throws on a duplicate name (SQLITE_CONSTRAINT_PRIMARYKEY). */
    create(f: McpUpstreamFields): McpUpstreamRow {
      insert.run(params(f));
      return toUpstream(byName.get(f.name)!);
    },
    /** Creates or replaces; `created` tells which. */
    put(f: McpUpstreamFields): { upstream: McpUpstreamRow; created: boolean } {
      const existed = byName.get(f.name) !== undefined;
      upsert.run(params(f));
      return { upstream: toUpstream(byName.get(f.name)!), created: !existed };
    },
    get(name: string): McpUpstreamRow | undefined {
      const r = byName.get(name);
      return r && toUpstream(r);
    },
    list: (): McpUpstreamRow[] => list.all().map(toUpstream),
    delete: (name: string): boolean => del.run(name).changes === 1,
  };
}
export type McpStore = ReturnType<typeof mcpStore>;
