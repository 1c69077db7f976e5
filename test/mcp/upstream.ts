import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { z } from 'zod';

export interface SeenCall {
  tool: string;
  args: Record<string, unknown>;
  headers: IncomingMessage['headers'];
}

const headersOf = (extra: { requestInfo?: { headers?: unknown } }): IncomingMessage['headers'] =>
  (extra.requestInfo?.headers ?? {}) as IncomingMessage['headers'];

export interface TestUpstream {
  url: string;
  port: number;
  calls: SeenCall[];
  close(): Promise<void>;
}

/**
 * An upstream MCP server built with the official SDK (stateless Streamable HTTP over node:http):
 * `echo`, `refund`, `delete_account` and `slow` (answers after `slowMs`). Every tool call is recorded.
 */
export async function startUpstream(opts: { slowMs?: number; stateful?: boolean; port?: number; reporting?: boolean } = {}): Promise<TestUpstream> {
  const calls: SeenCall[] = [];
  const validator = new AjvJsonSchemaValidator();

  const build = () => {
    const server = new McpServer(
      { name: 'test-upstream', version: '1.0.0' },
      { jsonSchemaValidator: validator, ...(opts.reporting ? { capabilities: { logging: {} } } : {}) },
    );
    if (opts.reporting) {
      // `report`: three progress steps (when the caller asked with a progress token) and a log line per step.
      server.registerTool('report', { description: 'Works in three steps, reporting each', inputSchema: { job: z.string() } }, async ({ job }, extra) => {
        calls.push({ tool: 'report', args: { job }, headers: headersOf(extra) });
        const progressToken = extra._meta?.progressToken;
        for (let step = 1; step <= 3; step++) {
          await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', logger: 'report', data: `${job}: step ${step}` } });
          if (progressToken !== undefined) {
            await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress: step, total: 3, message: `step ${step}` } });
          }
          await new Promise((r) => setTimeout(r, 20));
        }
        return { content: [{ type: 'text', text: `${job}: done` }] };
      });
    }
    server.registerTool(
      'echo',
      { description: 'Echoes the text', inputSchema: { text: z.string() } },
      async ({ text }, extra) => {
        calls.push({ tool: 'echo', args: { text }, headers: headersOf(extra) });
        return { content: [{ type: 'text', text: `echo: ${text}` }] };
      },
    );
    server.registerTool(
      'refund',
      { description: 'Refunds an order', inputSchema: { refund_id: z.string(), amount: z.number(), currency: z.string() } },
      async (args, extra) => {
        calls.push({ tool: 'refund', args, headers: headersOf(extra) });
        return { content: [{ type: 'text', text: `refunded ${args.amount} ${args.currency} on ${args.refund_id}` }] };
      },
    );
    server.registerTool(
      'delete_account',
      { description: 'Deletes an account', inputSchema: { account_id: z.string() } },
      async (args, extra) => {
        calls.push({ tool: 'delete_account', args, headers: headersOf(extra) });
        return { content: [{ type: 'text', text: 'deleted' }] };
      },
    );
    server.registerTool('slow', { description: 'Answers slowly' }, async (extra) => {
      calls.push({ tool: 'slow', args: {}, headers: headersOf(extra) });
      await new Promise((r) => setTimeout(r, opts.slowMs ?? 5000));
      return { content: [{ type: 'text', text: 'finally' }] };
    });
    return server;
  };

  // Stateful mode: one transport per session, as most MCP servers run (a restart forgets them all).
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const http: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
    if (opts.stateful) {
      const sid = req.headers['mcp-session-id'];
      let transport = typeof sid === 'string' ? sessions.get(sid) : undefined;
      if (!transport) {
        if (typeof sid === 'string' || req.method !== 'POST') {
          res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
          return;
        }
        const t = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          enableJsonResponse: true,
          onsessioninitialized: (id) => void sessions.set(id, t),
        });
        await build().connect(t);
        transport = t;
      }
      await transport.handleRequest(req, res, body);
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    const server = build();
    // A reporting upstream answers calls as an event stream, so its notifications travel with them.
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: !opts.reporting });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((r) => http.listen(opts.port ?? 0, '127.0.0.1', r));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    calls,
    port,
    close: () =>
      new Promise<void>((r) => {
        http.close(() => r());
        http.closeAllConnections();
      }),
  };
}

/** A URL on which nothing listens (a port bound, then released). */
export async function deadUrl(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}/mcp`;
}

/** A server that accepts connections and never answers (a hung upstream). */
export async function startHangingServer(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<import('node:net').Socket>();
  const s = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: () =>
      new Promise<void>((r) => {
        for (const socket of sockets) socket.destroy();
        s.close(() => r());
      }),
  };
}
