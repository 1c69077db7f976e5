import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import type { AppContext } from '../context.js';
import type { AgentPrincipal } from '../agents/access-token.js';
import { auditEarlyDecision, decideAction, type ActionDecision } from '../agents/decision.js';
import { toolAccess } from './tool-access.js';
import { gatewayToolName, mapToolCall, mappedTarget, MappingError, parseGatewayToolName, type MappedCall } from './tool-mapping.js';
import { UpstreamError, type UpstreamPool } from './upstream-pool.js';
import type { UpstreamConfig } from './upstream-config.js';

const SERVER_INFO = { name: 'gatehouse-mcp-gateway', version: '1.0.0' };
/** Where a tool error carries the decision as data, beside its text. */
export const DECISION_META_KEY = 'io.gatehouse/decision';

/**
 * The MCP server one request talks to (the gateway is stateless: a fresh one per HTTP request,
 * bound to the caller's verified principal). It lists the upstream tools the agent may use
 * and puts every call to the decision order before forwarding it.
 */
export function createGatewayServer(
  ctx: AppContext,
  pool: UpstreamPool,
  principal: AgentPrincipal,
  jsonSchemaValidator: jsonSchemaValidator,
): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: {} },
    // Shared: building one (an Ajv instance) per request would cost more than the request.
    jsonSchemaValidator,
    instructions: 'Tools of the project\'s upstream MCP servers, named <upstream>.<tool>. Every call is authorized by Gatehouse.',
  });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: await listTools(ctx, pool, principal) }));
  server.setRequestHandler(CallToolRequestSchema, async (request) =>
    callTool(ctx, pool, principal, request.params.name, request.params.arguments),
  );
  return server;
}

/** Steps: read the upstreams → fetch each one's tools (cached; a down upstream is left out) → keep the permitted ones, renamed. */
async function listTools(ctx: AppContext, pool: UpstreamPool, principal: AgentPrincipal): Promise<Tool[]> {
  const upstreams = [...(await pool.upstreams()).values()];
  const mayUse = await toolAccess(ctx, principal);
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

/**
 * Steps: resolve the tool → map it to action, resource, context → the token must carry the
 * capability → the decision order → allow: forward and return the upstream's answer;
 * otherwise a tool error with the reason. Every outcome is in the audit trail.
 */
async function callTool(
  ctx: AppContext,
  pool: UpstreamPool,
  principal: AgentPrincipal,
  name: string,
  args: Record<string, unknown> | undefined,
): Promise<CallToolResult> {
  const agentId = principal.agent.agent_id;
  const upstreams = (await pool.upstreams());
  const target = parseGatewayToolName(name, upstreams.keys()) ?? (await ownerOfBareName(pool, [...upstreams.values()], name));
  if (!target) {
    await audit(ctx, principal, { action: null, resource: `tool:${name}`, context: args ?? {} }, 'deny', `not_found: no tool named ${name}`);
    throw new McpError(ErrorCode.InvalidParams, `Tool ${name} not found`);
  }
  const upstream = upstreams.get(target.upstream)!;

  let call: MappedCall;
  try {
    call = mapToolCall(upstream.name, target.tool, upstream.tools[target.tool], args);
  } catch (err) {
    if (!(err instanceof MappingError)) throw err;
    const { action, resource } = mappedTarget(upstream.name, target.tool, upstream.tools[target.tool]);
    const reason = `invalid_request: ${err.message}`;
    await audit(ctx, principal, { action, resource, context: args ?? {} }, 'deny', reason);
    return toolError(`denied: ${reason}`, { decision: 'deny', reason, policy_version: await safePolicyVersion(ctx) });
  }

  // The token's capabilities bound what this sign-in may do, whatever the agent holds now.
  if (!principal.capabilities.includes(call.action)) {
    const reason = `not_granted: ${call.action} (capability)`;
    await auditEarlyDecision(ctx, { agent_id: agentId, user_id: principal.userId, ...call, decision: 'deny', reason });
    return toolError(`denied: ${reason}`, { decision: 'deny', reason, policy_version: await safePolicyVersion(ctx) });
  }

  const decision = await decideAction(ctx, { principal, ...call, via: 'mcp' });
  if (decision.decision === 'deny') return toolError(`denied: ${decision.reason}`, decision);
  if (decision.decision === 'approval_required') {
    return toolError(
      `${decision.reason} (approval_id: ${decision.approval_id ?? 'none'}). ` +
        'A person must approve this call; call the tool again with the same arguments once it is approved.',
      decision,
    );
  }

  try {
    return await pool.call(upstream, target.tool, args);
  } catch (err) {
    if (!(err instanceof UpstreamError)) throw err;
    await audit(ctx, principal, call, null, err.reason, 'tool_call');
    return toolError(err.reason, undefined);
  }
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

function toolError(text: string, decision: ActionDecision | undefined): CallToolResult {
  return {
    content: [{ type: 'text', text }],
    isError: true,
    ...(decision ? { _meta: { [DECISION_META_KEY]: { ...decision } } } : {}),
  };
}

async function audit(
  ctx: AppContext,
  principal: AgentPrincipal,
  call: { action: string | null; resource: string; context: unknown },
  decision: string | null,
  reason: string,
  kind = 'decision',
): Promise<void> {
  try {
    await ctx.store.audit.append({
      kind,
      agent_id: principal.agent.agent_id,
      user_id: principal.userId,
      action: call.action,
      resource: call.resource,
      context: call.context,
      decision,
      reason,
      policy_version: await safePolicyVersion(ctx),
    });
  } catch (err) {
    ctx.logger.error({ err }, 'audit append failed');
  }
}

async function safePolicyVersion(ctx: AppContext): Promise<string> {
  try {
    return (await ctx.policy.current()).version;
  } catch {
    return '';
  }
}
