import { z } from 'zod';
import type { AppContext } from '../context.js';
import { errors, validationError } from '../errors.js';
import { mayReachPrivate, outboundProblem } from '../outbound.js';
import type { McpUpstreamFields, McpUpstreamRow, ToolMapping } from '../store/mcp.js';

/**
 * The configuration of the gateway's upstream MCP servers: validation of what the management
 * API and the project file send, sealing of the extra headers, and the public view.
 */

export const DEFAULT_TIMEOUT_MS = 10_000;
/** Change-counter domain: every worker drops its upstream connections and tool caches on a bump. */
export const MCP_DOMAIN = 'mcp';

/**
 * No dots and no double underscores, no leading/trailing `-`/`_`, so that both
 * `<upstream>.<tool>` and `<upstream>__<tool>` split back unambiguously.
 */
const UPSTREAM_NAME = /^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$/;
const TOOL_NAME = /^[A-Za-z0-9_.\-/]{1,128}$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Header values must survive fetch: no control characters. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** Headers the transport sets itself. */
const RESERVED_HEADERS = new Set(['content-type', 'accept', 'content-length', 'host', 'mcp-session-id', 'mcp-protocol-version']);

function isHttpUrl(u: string): boolean {
  try {
    const url = new URL(u);
    return (url.protocol === 'http:' || url.protocol === 'https:') && !url.username && !url.password;
  } catch {
    return false;
  }
}

const PERMISSION_KEY = /^[^\s:]+:[^\s:]+$/;
const RESOURCE = /^[^\s:]+:\S+$/;
const KIND = /^[A-Za-z0-9_-]+$/;

const contextSource = z.union([
  z.string().min(1),
  z.object({ argument: z.string().min(1) }).strict(),
  z.object({ value: z.unknown() }).strict(),
]);

export const toolMappingSchema = z
  .object({
    action: z.string().regex(PERMISSION_KEY, 'must be a permission key <action>:<resource_kind>').optional(),
    resource: z.string().regex(RESOURCE, 'must be an object <kind>:<id>').optional(),
    resource_from_argument: z
      .object({
        kind: z.string().regex(KIND, 'must be a resource kind such as "refund"'),
        argument: z.string().min(1),
      })
      .strict()
      .optional(),
    context: z.record(z.string().min(1), contextSource).optional(),
  })
  .strict()
  .refine((m) => !(m.resource && m.resource_from_argument), {
    message: 'give either resource or resource_from_argument, not both',
    path: ['resource_from_argument'],
  });

const toolsSchema = z
  .union([
    z.record(z.string().regex(TOOL_NAME, 'must be an MCP tool name'), toolMappingSchema),
    // The list form: [{ name, ...mapping }]
    z.array(toolMappingSchema.and(z.object({ name: z.string().regex(TOOL_NAME, 'must be an MCP tool name') }))),
  ])
  .transform((tools) => {
    if (!Array.isArray(tools)) return tools as Record<string, ToolMapping>;
    const out: Record<string, ToolMapping> = {};
    for (const { name, ...mapping } of tools) out[name] = mapping as ToolMapping;
    return out;
  });

const upstreamBody = {
  url: z.string().refine(isHttpUrl, 'must be an absolute http or https URL'),
  headers: z
    .record(
      z.string().regex(HEADER_NAME, 'must be an HTTP header name').refine((h) => !RESERVED_HEADERS.has(h.toLowerCase()), 'is set by the gateway itself'),
      z.string().regex(HEADER_VALUE, 'must hold no control characters'),
    )
    .nullable()
    .optional(),
  timeout_ms: z.number().int().min(100).max(300_000).optional(),
  tools: toolsSchema.optional(),
};

export const upstreamCreateSchema = z
  .object({ name: z.string().max(64).regex(UPSTREAM_NAME, 'letters, digits and single - or _ between them'), ...upstreamBody })
  .strict();
/** PUT /upstreams/{name}: the name comes from the path (a body `name` must agree). */
export const upstreamPutSchema = z.object({ name: z.string().optional(), ...upstreamBody }).strict();

export type UpstreamCreate = z.infer<typeof upstreamCreateSchema>;
export type UpstreamPut = z.infer<typeof upstreamPutSchema>;

/** An upstream as the gateway uses it: headers opened. */
export interface UpstreamConfig {
  name: string;
  url: string;
  headers: Record<string, string>;
  timeoutMs: number;
  tools: Record<string, ToolMapping>;
  updatedAt: number;
}

export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const r = schema.safeParse(body ?? {});
  if (!r.success) throw validationError(r.error);
  return r.data;
}

export function isValidUpstreamName(name: string): boolean {
  return name.length <= 64 && UPSTREAM_NAME.test(name);
}

function sealHeaders(ctx: AppContext, headers: Record<string, string> | null | undefined): string | null {
  return headers && Object.keys(headers).length ? ctx.box.seal(JSON.stringify(headers)) : null;
}

export function openHeaders(ctx: AppContext, sealed: string | null): Record<string, string> {
  if (!sealed) return {};
  try {
    return JSON.parse(ctx.box.open(sealed)) as Record<string, string>;
  } catch {
    // A value sealed under another key: fail closed to no extra headers, and say so.
    ctx.logger.warn('an MCP upstream\'s headers cannot be opened with the current secret');
    return {};
  }
}

export function toUpstreamConfig(ctx: AppContext, row: McpUpstreamRow): UpstreamConfig {
  return {
    name: row.name,
    url: row.url,
    headers: openHeaders(ctx, row.headers_sealed),
    timeoutMs: row.timeout_ms,
    tools: row.tools,
    updatedAt: row.updated_at,
  };
}

/** What the management API shows: header names only, never their values. */
export function publicView(ctx: AppContext, row: McpUpstreamRow) {
  return {
    name: row.name,
    url: row.url,
    header_names: Object.keys(openHeaders(ctx, row.headers_sealed)),
    timeout_ms: row.timeout_ms,
    tools: row.tools,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

function fields(ctx: AppContext, name: string, body: Omit<UpstreamPut, 'name'>, keepSealed: string | null): McpUpstreamFields {
  return {
    name,
    url: body.url,
    // Absent headers keep the stored ones (the API never shows their values to send back); null or {} clears them.
    headers_sealed: body.headers === undefined ? keepSealed : sealHeaders(ctx, body.headers),
    timeout_ms: body.timeout_ms ?? DEFAULT_TIMEOUT_MS,
    tools: body.tools ?? {},
  };
}

/** The upstream's URL must be one the outbound rules let us reach (checked again at each connection; a name that does not resolve yet is accepted). */
async function assertReachable(ctx: AppContext, url: string): Promise<void> {
  const problem = await outboundProblem(url, mayReachPrivate(ctx.config, url), { unresolved: 'accept' });
  if (problem) throw errors.invalidRequest(`url: ${problem}`, { issues: [{ path: 'url', message: problem, code: 'custom' }] });
}

export async function createUpstream(ctx: AppContext, body: UpstreamCreate): Promise<McpUpstreamRow> {
  await assertReachable(ctx, body.url);
  if (await ctx.store.mcp.get(body.name)) throw errors.conflict(`an upstream named "${body.name}" exists`);
  const row = await ctx.store.transaction(async (tx) => {
    const r = await tx.mcp.create(fields(ctx, body.name, body, null));
    await tx.settings.bump(MCP_DOMAIN);
    return r;
  });
  return row;
}

/** Creates or replaces the named upstream. */
export async function putUpstream(ctx: AppContext, name: string, body: UpstreamPut): Promise<{ upstream: McpUpstreamRow; created: boolean }> {
  if (body.name !== undefined && body.name !== name) {
    throw errors.invalidRequest('name: must match the name in the path', {
      issues: [{ path: 'name', message: 'must match the name in the path', code: 'custom' }],
    });
  }
  await assertReachable(ctx, body.url);
  return ctx.store.transaction(async (tx) => {
    const existing = await tx.mcp.get(name);
    const out = await tx.mcp.put(fields(ctx, name, body, existing?.headers_sealed ?? null));
    await tx.settings.bump(MCP_DOMAIN);
    return out;
  });
}

export function deleteUpstream(ctx: AppContext, name: string): Promise<boolean> {
  return ctx.store.transaction(async (tx) => {
    const gone = await tx.mcp.delete(name);
    if (gone) await tx.settings.bump(MCP_DOMAIN);
    return gone;
  });
}
