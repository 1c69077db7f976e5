import { AsyncLocalStorage } from 'node:async_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ErrorCode,
  LoggingMessageNotificationSchema,
  McpError,
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type LoggingMessageNotification,
  type Progress,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { AppContext } from '../context.js';
import { outboundFetch } from '../outbound.js';
import { MCP_DOMAIN, toUpstreamConfig, type UpstreamConfig } from './upstream-config.js';

/** How long an upstream's tool list is trusted before it is asked again (a list_changed notice refreshes sooner). */
export const TOOL_LIST_TTL_MS = 30_000;
/** How long an upstream that could not be reached is left out of tools/list before it is tried again. */
const UNREACHABLE_TTL_MS = 5_000;

const CLIENT_INFO = { name: 'gatehouse-mcp-gateway', version: '1.0.0' };

/** A failure to reach or use an upstream, as a stable reason code and a sentence for the tool error. */
export class UpstreamError extends Error {
  constructor(
    readonly code: 'upstream_unavailable' | 'upstream_timeout' | 'upstream_error',
    message: string,
  ) {
    super(message);
  }
  get reason(): string {
    return `${this.code}: ${this.message}`;
  }
}

interface Connection {
  /** url, headers and timeout: a change replaces the connection */
  key: string;
  client: Promise<Client>;
  tools?: { at: number; list: Tool[] };
}

function describe(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const cause = e?.cause?.code ?? e?.cause?.message;
  return [e?.message ?? String(err), cause].filter(Boolean).join(': ');
}

/** Classifies an SDK client failure; `stale` says the connection should be dropped. */
function classify(upstream: UpstreamConfig, err: unknown): { error: UpstreamError; stale: boolean } {
  if (err instanceof UpstreamError) return { error: err, stale: true };
  if (err instanceof McpError && err.code === ErrorCode.RequestTimeout) {
    return {
      error: new UpstreamError('upstream_timeout', `upstream "${upstream.name}" did not answer within ${upstream.timeoutMs} ms`),
      stale: false,
    };
  }
  if (err instanceof McpError && err.code !== ErrorCode.ConnectionClosed) {
    return { error: new UpstreamError('upstream_error', `upstream "${upstream.name}" answered with an error: ${err.message}`), stale: false };
  }
  if (err instanceof StreamableHTTPError) {
    return {
      error: new UpstreamError('upstream_error', `upstream "${upstream.name}" answered HTTP ${err.code ?? '?'}`),
      stale: true,
    };
  }
  return {
    error: new UpstreamError('upstream_unavailable', `upstream "${upstream.name}" cannot be reached (${describe(err)})`),
    stale: true,
  };
}

/** What the caller of one tool call hears while it runs. */
export interface CallListeners {
  /** progress notifications of the call (asked for by the caller with a progress token) */
  onProgress?: (progress: Progress) => void;
  /** log notifications the upstream sends while answering the call */
  onLog?: (params: LoggingMessageNotification['params']) => void;
}

/**
 * The call an upstream notification belongs to. A notification related to a request arrives on
 * the response stream of that request, which the SDK reads in the async context of the call
 * that sent it; connections are made outside any call, so their own streams belong to none.
 */
const callScope = new AsyncLocalStorage<CallListeners>();

/**
 * One SDK client per upstream, reused across requests, with the upstream's tool list cached
 * briefly. Per process: every worker keeps its own and drops them all when the `mcp` change
 * counter moves (an upstream added, changed or removed anywhere).
 */
export class UpstreamPool {
  private conns = new Map<string, Connection>();
  private configs = new Map<string, UpstreamConfig>();
  /** upstreams that could not be listed lately, by name */
  private unreachable = new Map<string, { at: number; error: UpstreamError }>();
  private loadedVersion = -1;

  constructor(private readonly ctx: AppContext) {}

  /** The configured upstreams, freshly read when the configuration changed. */
  async upstreams(): Promise<Map<string, UpstreamConfig>> {
    const version = await this.ctx.store.settings.version(MCP_DOMAIN);
    if (version !== this.loadedVersion) {
      const next = new Map((await this.ctx.store.mcp.list()).map((r) => [r.name, toUpstreamConfig(this.ctx, r)] as const));
      for (const [name, conn] of this.conns) {
        const cfg = next.get(name);
        if (!cfg || keyOf(cfg) !== conn.key) this.drop(name);
      }
      this.configs = next;
      this.unreachable.clear();
      this.loadedVersion = version;
    }
    return this.configs;
  }

  /** The upstream's tools, from the cache when fresh. Throws UpstreamError. */
  async tools(upstream: UpstreamConfig): Promise<Tool[]> {
    const failed = this.unreachable.get(upstream.name);
    if (failed && this.ctx.clock.now() - failed.at < UNREACHABLE_TTL_MS) throw failed.error;
    const conn = this.connection(upstream);
    if (conn.tools && this.ctx.clock.now() - conn.tools.at < TOOL_LIST_TTL_MS) return conn.tools.list;
    let client: Client;
    try {
      client = await conn.client;
    } catch (err) {
      // A connection that never came up is never reused.
      this.drop(upstream.name, conn);
      const { error } = classify(upstream, err);
      this.unreachable.set(upstream.name, { at: this.ctx.clock.now(), error });
      throw error;
    }
    try {
      const list: Tool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined, { timeout: upstream.timeoutMs });
        list.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor && list.length < 10_000);
      if (this.conns.get(upstream.name) === conn) conn.tools = { at: this.ctx.clock.now(), list };
      this.unreachable.delete(upstream.name);
      return list;
    } catch (err) {
      const { error, stale } = classify(upstream, err);
      if (stale) this.drop(upstream.name, conn);
      // Remember the failure briefly so a down upstream does not slow every tools/list.
      this.unreachable.set(upstream.name, { at: this.ctx.clock.now(), error });
      throw error;
    }
  }

  /**
   * Calls one tool of the upstream within its timeout (restarted by each progress notification);
   * its progress and log notifications go to `listeners`. Throws UpstreamError.
   */
  async call(
    upstream: UpstreamConfig,
    tool: string,
    args: Record<string, unknown> | undefined,
    listeners: CallListeners = {},
  ): Promise<CallToolResult> {
    for (let attempt = 0; ; attempt++) {
      const conn = this.connection(upstream);
      let client: Client;
      try {
        client = await conn.client;
      } catch (err) {
        this.drop(upstream.name, conn);
        throw classify(upstream, err).error;
      }
      try {
        const { onProgress } = listeners;
        const options = { timeout: upstream.timeoutMs, ...(onProgress ? { onprogress: onProgress, resetTimeoutOnProgress: true } : {}) };
        const result = (await callScope.run(listeners, () => client.callTool({ name: tool, arguments: args }, undefined, options))) as CallToolResult;
        this.unreachable.delete(upstream.name);
        return result;
      } catch (err) {
        const { error, stale } = classify(upstream, err);
        if (stale) this.drop(upstream.name, conn);
        // The upstream forgot our session (it restarted): the call never ran there, so one retry on a new session.
        if (attempt === 0 && err instanceof StreamableHTTPError && err.code === 404) continue;
        throw error;
      }
    }
  }

  /** Closes every upstream client (server shutdown). */
  async close(): Promise<void> {
    for (const name of [...this.conns.keys()]) this.drop(name);
  }

  private connection(upstream: UpstreamConfig): Connection {
    const key = keyOf(upstream);
    const existing = this.conns.get(upstream.name);
    if (existing && existing.key === key) return existing;
    if (existing) this.drop(upstream.name);
    const conn: Connection = { key, client: callScope.exit(() => this.connect(upstream)) };
    // An unhandled rejection would crash the process; callers see the failure when they await.
    conn.client.catch(() => undefined);
    this.conns.set(upstream.name, conn);
    return conn;
  }

  private async connect(upstream: UpstreamConfig): Promise<Client> {
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      const conn = this.conns.get(upstream.name);
      if (conn) conn.tools = undefined;
    });
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => callScope.getStore()?.onLog?.(n.params));
    client.onerror = (err) => this.ctx.logger.debug({ upstream: upstream.name, err: describe(err) }, 'mcp upstream transport error');
    const transport = new StreamableHTTPClientTransport(new URL(upstream.url), {
      requestInit: { headers: upstream.headers },
      // Under the outbound rules: an upstream on a loopback, private or link-local address is refused unless allowed.
      fetch: outboundFetch(this.ctx.config),
      // A broken standalone event stream is retried a little, then left; calls do not depend on it.
      reconnectionOptions: { initialReconnectionDelay: 1000, maxReconnectionDelay: 10_000, reconnectionDelayGrowFactor: 2, maxRetries: 2 },
    });
    await client.connect(transport, { timeout: upstream.timeoutMs });
    return client;
  }

  private drop(name: string, only?: Connection): void {
    const conn = this.conns.get(name);
    if (!conn || (only && conn !== only)) return;
    this.conns.delete(name);
    conn.client.then((c) => c.close()).catch(() => undefined);
  }
}

const keyOf = (u: UpstreamConfig): string => JSON.stringify([u.url, u.headers, u.timeoutMs]);
