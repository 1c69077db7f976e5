import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { parseJson, secondsOf } from './util.js';

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

const BY_NAME = 'SELECT * FROM mcp_upstreams WHERE name = ?';
const params = (f: McpUpstreamFields, t: number) => ({ ...f, tools: JSON.stringify(f.tools), t });

/** The upstream MCP servers of the gateway. Callers bump the `mcp` change counter on writes. */
export function mcpStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const byName = (name: string) => sql.get<Row>(BY_NAME, [name]);
  return {
    /** Throws on a duplicate name (a unique violation). */
    async create(f: McpUpstreamFields): Promise<McpUpstreamRow> {
      await sql.run(
        `INSERT INTO mcp_upstreams (name, url, headers_sealed, timeout_ms, tools, created_at, updated_at)
         VALUES (@name, @url, @headers_sealed, @timeout_ms, @tools, @t, @t)`,
        params(f, now()),
      );
      return toUpstream((await byName(f.name))!);
    },
    /** Creates or replaces; `created` tells which. */
    async put(f: McpUpstreamFields): Promise<{ upstream: McpUpstreamRow; created: boolean }> {
      const existed = (await byName(f.name)) !== undefined;
      await sql.run(
        `INSERT INTO mcp_upstreams (name, url, headers_sealed, timeout_ms, tools, created_at, updated_at)
         VALUES (@name, @url, @headers_sealed, @timeout_ms, @tools, @t, @t)
         ON CONFLICT (name) DO UPDATE SET url = excluded.url, headers_sealed = excluded.headers_sealed,
           timeout_ms = excluded.timeout_ms, tools = excluded.tools, updated_at = excluded.updated_at`,
        params(f, now()),
      );
      return { upstream: toUpstream((await byName(f.name))!), created: !existed };
    },
    async get(name: string): Promise<McpUpstreamRow | undefined> {
      const r = await byName(name);
      return r && toUpstream(r);
    },
    list: async (): Promise<McpUpstreamRow[]> => (await sql.all<Row>('SELECT * FROM mcp_upstreams ORDER BY name')).map(toUpstream),
    delete: async (name: string): Promise<boolean> => (await sql.run('DELETE FROM mcp_upstreams WHERE name = ?', [name])).changes === 1,
  };
}
export type McpStore = ReturnType<typeof mcpStore>;
