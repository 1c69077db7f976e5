import type { ToolMapping } from '../store/mcp.js';

/**
 * How a gateway tool name and its arguments become the action, resource and context that the
 * decision order judges. Defaults: tool `t` of upstream `u` is action `invoke:tools`
 * on resource `tool:u.t` with the arguments as context.
 */

export const DEFAULT_ACTION = 'invoke:tools';

/** The separator the gateway lists tools with; `__` is accepted too on calls. */
export const TOOL_SEPARATOR = '.';
const ALT_SEPARATOR = '__';

export const gatewayToolName = (upstream: string, tool: string): string => `${upstream}${TOOL_SEPARATOR}${tool}`;

/** Splits `<upstream>.<tool>` (or `<upstream>__<tool>`) against the configured upstream names. */
export function parseGatewayToolName(name: string, upstreams: Iterable<string>): { upstream: string; tool: string } | undefined {
  for (const u of upstreams) {
    for (const sep of [TOOL_SEPARATOR, ALT_SEPARATOR]) {
      const prefix = u + sep;
      if (name.startsWith(prefix) && name.length > prefix.length) return { upstream: u, tool: name.slice(prefix.length) };
    }
  }
  return undefined;
}

export interface MappedCall {
  action: string;
  resource: string;
  context: Record<string, unknown>;
}

export class MappingError extends Error {}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The action and the resource as far as they are known before a call: for listing and permission checks. */
export function mappedTarget(upstream: string, tool: string, mapping: ToolMapping | undefined): { action: string; resource: string } {
  const action = mapping?.action ?? DEFAULT_ACTION;
  if (mapping?.resource_from_argument) return { action, resource: `${mapping.resource_from_argument.kind}:*` };
  return { action, resource: mapping?.resource ?? `tool:${upstream}.${tool}` };
}

/** Maps one call; a missing or unusable resource argument is a MappingError (the call is refused). */
export function mapToolCall(upstream: string, tool: string, mapping: ToolMapping | undefined, args: unknown): MappedCall {
  const argumentsObject = isRecord(args) ? args : {};
  const { action } = mappedTarget(upstream, tool, mapping);

  let resource = mapping?.resource ?? `tool:${upstream}.${tool}`;
  const from = mapping?.resource_from_argument;
  if (from) {
    const value = argumentsObject[from.argument];
    const ok = (typeof value === 'string' && value.length > 0 && !/\s/.test(value)) || (typeof value === 'number' && Number.isFinite(value));
    if (!ok) throw new MappingError(`argument "${from.argument}" must be a non-empty string or a number: it names the ${from.kind}`);
    resource = `${from.kind}:${String(value)}`;
  }

  let context: Record<string, unknown> = argumentsObject;
  if (mapping?.context) {
    context = {};
    for (const [field, source] of Object.entries(mapping.context)) {
      if (typeof source === 'string' || 'argument' in source) {
        const arg = typeof source === 'string' ? source : source.argument;
        // A missing argument leaves the field out: limits on it then fail closed.
        if (Object.hasOwn(argumentsObject, arg)) context[field] = argumentsObject[arg];
      } else {
        context[field] = source.value;
      }
    }
  }
  return { action, resource, context };
}
