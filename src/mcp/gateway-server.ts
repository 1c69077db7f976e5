import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type ServerNotification,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import type { AppContext } from '../context.js';
import type { AgentPrincipal } from '../authz/agent-access-token.js';
import { decisionAnswer, type DecisionAnswer } from '../authz/core.js';
import { authorize, refuse } from '../authz/pipeline.js';
import { recordAuditOrLog } from '../authz/audit.js';
import type { PipelineCause } from '../authz/cause.js';
import { mayList } from '../authz/listing.js';
import { gatewayToolName, mapToolCall, mappedTarget, MappingError, parseGatewayToolName, type MappedCall } from './tool-mapping.js';
import { UpstreamError, type CallListeners, type UpstreamPool } from './upstream-pool.js';
import type { UpstreamConfig } from './upstream-config.js';

const SERVER_INFO = { name: 'gatehouse-mcp-gateway', version: '1.0.0' };
/** Where a tool error carries the decision as data, beside its text. */
export const DECISION_META_KEY = 'io.gatehouse/decision';

/**
 * The MCP server one request talks to (the gateway is stateless: a fresh one per HTTP request,
 * bound to the caller's verified principal). It lists the upstream tools the agent may use
 * and puts every call to the decision pipeline before forwarding it; the upstream's progress
 * and log notifications for the call are passed on to the caller.
 */
export function createGatewayServer(
  ctx: AppContext,
  pool: UpstreamPool,
  principal: AgentPrincipal,
  jsonSchemaValidator: jsonSchemaValidator,
): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: {}, logging: {} },
    // Shared: building one (an Ajv instance) per request would cost more than the request.
    jsonSchemaValidator,
    instructions: 'Tools of the project\'s upstream MCP servers, named <upstream>.<tool>. Every call is authorized by Gatehouse.',
  });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: await listTools(ctx, pool, principal) }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const progressToken = request.params._meta?.progressToken;
    const notify = (n: ServerNotification) => extra.sendNotification(n).catch(() => undefined);
    const listeners: CallListeners = {
      onLog: (params) => void notify({ method: 'notifications/message', params }),
      ...(progressToken !== undefined
        ? { onProgress: (p) => void notify({ method: 'notifications/progress', params: { ...p, progressToken } }) }
        : {}),
    };
    return callTool(ctx, pool, principal, request.params.name, request.params.arguments, listeners);
  });
  return server;
}

/** Steps: read the upstreams → fetch each one's tools (cached; a down upstream is left out) → keep the permitted ones, renamed. */
async function listTools(ctx: AppContext, pool: UpstreamPool, principal: AgentPrincipal): Promise<Tool[]> {
  const upstreams = [...(await pool.upstreams()).values()];
  const mayUse = await mayList(ctx, principal);
  const lists = await Promise.allSettled(upstreams.map((u) => pool.tools(u)));
  const out: Tool[] = [];
  lists.forEach((r, i) => {
    const u = upstreams[i]!;
    if (r.status === 'rejected') {
      ctx.logger.warn({ upstream: u.name, reason: (r.reason as UpstreamError).reason ?? String(r.reason) }, 'mcp upstream left out of tools/list');
      return;
    }
    for (const tool of r.value) {
      const { action, resource } = mappedTarget(u.name, tool.name, u.tools[tool.name]);
      if (mayUse(action, resource)) out.push({ ...tool, name: gatewayToolName(u.name, tool.name) });
    }
  });
  return out;
}

/** A tool call resolved against the configured upstreams: the upstream, and the action it maps to (or why it cannot be mapped). */
export interface ResolvedCall {
  upstream: UpstreamConfig;
  tool: string;
  /** the action and resource as far as known without the arguments */
  target: { action: string; resource: string };
  mapped: MappedCall | { error: string };
}

/** Resolves `<upstream>.<tool>` (or a bare name only one upstream has) and maps its arguments; undefined when no such tool. */
export async function resolveToolCall(pool: UpstreamPool, name: string, args: unknown): Promise<ResolvedCall | undefined> {
  const upstreams = await pool.upstreams();
  const target = parseGatewayToolName(name, upstreams.keys()) ?? (await ownerOfBareName(pool, [...upstreams.values()], name));
  if (!target) return undefined;
  const upstream = upstreams.get(target.upstream)!;
  const mapping = upstream.tools[target.tool];
  let mapped: ResolvedCall['mapped'];
  try {
    mapped = mapToolCall(upstream.name, target.tool, mapping, args);
  } catch (err) {
    if (!(err instanceof MappingError)) throw err;
    mapped = { error: err.message };
  }
  return { upstream, tool: target.tool, target: mappedTarget(upstream.name, target.tool, mapping), mapped };
}

/**
 * Steps: resolve the tool → map it to action, resource, context → the decision pipeline (the
 * token must carry the capability, then the decision order) → allow: forward and return the
 * upstream's answer; otherwise a tool error with the reason. Every outcome is in the audit trail.
 */
async function callTool(
  ctx: AppContext,
  pool: UpstreamPool,
  principal: AgentPrincipal,
  name: string,
  args: Record<string, unknown> | undefined,
  listeners: CallListeners,
): Promise<CallToolResult> {
  const resolved = await resolveToolCall(pool, name, args);
  if (!resolved) {
    await refusal(ctx, principal, { action: null, resource: `tool:${name}`, context: args ?? {} }, { code: 'unknown_tool', tool: name });
    throw new McpError(ErrorCode.InvalidParams, `Tool ${name} not found`);
  }
  const { upstream, tool, target, mapped } = resolved;
  if ('error' in mapped) {
    const cause: PipelineCause = { code: 'invalid_request', message: mapped.error };
    const answer = await refusal(ctx, principal, { ...target, context: args ?? {} }, cause);
    return toolError(`denied: ${answer.reason}`, answer);
  }

  const result = await authorize(ctx, { via: 'mcp', principal, ...mapped });
  if (result.outcome === 'unknown_agent') throw new McpError(ErrorCode.InvalidRequest, 'the agent is unknown or revoked');
  const decision = decisionAnswer(result.decision, result.approvalId);
  if (decision.decision === 'deny') return toolError(`denied: ${decision.reason}`, decision);
  if (decision.decision === 'approval_required') {
    return toolError(
      `${decision.reason} (approval_id: ${decision.approval_id ?? 'none'}). ` +
        'A person must approve this call; call the tool again with the same arguments once it is approved.',
      decision,
    );
  }

  try {
    return await pool.call(upstream, tool, args, listeners);
  } catch (err) {
    if (!(err instanceof UpstreamError)) throw err;
    await recordAuditOrLog(ctx, {
      kind: 'tool_call',
      agent_id: principal.agent.agent_id,
      user_id: principal.userId,
      ...mapped,
      decision: null,
      reason: err.reason,
      policy_version: decision.policy_version,
    });
    return toolError(err.reason, undefined);
  }
}

/**
 * A call refused before the decision order (no such tool, arguments that do not map): the
 * pipeline's refuse mode records and counts it as a deny. A refusal it could not record is
 * answered as an internal error, never as the refusal.
 */
async function refusal(
  ctx: AppContext,
  principal: AgentPrincipal,
  call: { action: string | null; resource: string; context: unknown },
  cause: PipelineCause,
): Promise<DecisionAnswer> {
  const result = await refuse(ctx, { via: 'mcp', principal, ...call, cause });
  if (result.outcome !== 'decided' || result.decision.cause.code !== cause.code) {
    throw new McpError(ErrorCode.InternalError, 'the refusal could not be recorded');
  }
  return decisionAnswer(result.decision);
}

/** A tool called without its upstream prefix is accepted when exactly one upstream has a tool of that name. */
async function ownerOfBareName(pool: UpstreamPool, upstreams: UpstreamConfig[], name: string) {
  const lists = await Promise.allSettled(upstreams.map((u) => pool.tools(u)));
  const owners = upstreams.filter((_u, i) => {
    const r = lists[i]!;
    return r.status === 'fulfilled' && r.value.some((t) => t.name === name);
  });
  return owners.length === 1 ? { upstream: owners[0]!.name, tool: name } : undefined;
}

function toolError(text: string, decision: DecisionAnswer | undefined): CallToolResult {
  return {
    content: [{ type: 'text', text }],
    isError: true,
    ...(decision ? { _meta: { [DECISION_META_KEY]: { ...decision } } } : {}),
  };
}
