import { z } from 'zod';

/**
 * The OpenAPI 3.1 document of the management API, built from the same zod schemas that
 * validate requests. Every admin route registers its operation here (the admin routes of
 * other areas, such as approvals and MCP upstreams, too); the document is built lazily.
 */

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface ResponseDef {
  description: string;
  /** the JSON body; none for 204 */
  schema?: z.ZodType;
}

export interface OperationDef {
  method: HttpMethod;
  /** OpenAPI path relative to the server base (`/admin/v1` unless `base` says otherwise), `{param}` style */
  path: string;
  summary: string;
  tags?: string[];
  /** the JSON request body */
  request?: z.ZodType;
  /** query parameters, an object schema */
  query?: z.ZodObject;
  /** path parameters, an object schema (documents their form; plain strings when absent) */
  params?: z.ZodObject;
  responses: Record<number | string, ResponseDef | string>;
  /** false: no bearer token needed (the document itself) */
  auth?: boolean;
  /** the path prefix the operation lives under, when not `/admin/v1` (for example `` for `/v1/ssf/streams`) */
  base?: string;
}

const ADMIN_BASE = '/admin/v1';
const operations = new Map<string, OperationDef>();
let cached: { size: number; issuer: string; doc: Record<string, unknown> } | undefined;

/** Adds (or replaces: registering twice is harmless) one operation of the document. */
export function registerOperation(op: OperationDef): void {
  operations.set(`${op.method} ${op.base ?? ADMIN_BASE}${op.path}`, op);
  cached = undefined;
}

export function registeredOperations(): OperationDef[] {
  return [...operations.values()];
}

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  try {
    const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as Record<string, unknown>;
    return rest;
  } catch {
    // A schema JSON Schema cannot express (a cycle, say) is documented as "any" rather than failing the document.
    return {};
  }
}

const errorBody = {
  type: 'object',
  required: ['error'],
  properties: {
    error: { type: 'string' },
    error_description: { type: 'string' },
    issues: {
      type: 'array',
      items: {
        type: 'object',
        properties: { path: { type: 'string' }, message: { type: 'string' }, code: { type: 'string' } },
      },
    },
  },
};

function operationObject(op: OperationDef): Record<string, unknown> {
  const params = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => ({
    name: m[1],
    in: 'path',
    required: true,
    schema: op.params?.shape[m[1]!] ? jsonSchema(op.params.shape[m[1]!] as z.ZodType, 'input') : { type: 'string' },
    ...(m[1] === 'agent_id' ? { description: 'URL-encoded' } : {}),
  }));
  const query = op.query
    ? Object.entries(op.query.shape).map(([name, s]) => ({
        name,
        in: 'query',
        required: !(s as z.ZodType).safeParse(undefined).success,
        schema: jsonSchema(s as z.ZodType, 'input'),
      }))
    : [];
  const responses: Record<string, unknown> = {};
  for (const [status, def] of Object.entries(op.responses)) {
    const d = typeof def === 'string' ? { description: def } : def;
    responses[status] = {
      description: d.description,
      ...(d.schema ? { content: { 'application/json': { schema: jsonSchema(d.schema, 'output') } } } : {}),
    };
  }
  if (op.auth !== false) responses['401'] ??= { description: 'missing or wrong admin token', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
  if (op.request || op.query) responses['400'] ??= { description: 'a field is invalid (each named in `issues`)', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
  if (params.length) responses['404'] ??= { description: 'unknown id', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
  return {
    summary: op.summary,
    operationId: `${op.method}${op.path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
    ...(op.tags ? { tags: op.tags } : {}),
    ...(params.length || query.length ? { parameters: [...params, ...query] } : {}),
    ...(op.request ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(op.request, 'input') } } } } : {}),
    responses,
    ...(op.auth === false ? { security: [] } : {}),
  };
}

/** The document, rebuilt only when an operation was registered since the last build. */
export function openApiDocument(issuer: string): Record<string, unknown> {
  if (cached && cached.size === operations.size && cached.issuer === issuer) return cached.doc;
  const paths: Record<string, Record<string, unknown>> = {};
  const ops = [...operations.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  for (const op of ops) {
    const base = op.base ?? ADMIN_BASE;
    // Paths are relative to the server `{issuer}/admin/v1`; an operation elsewhere names its own server.
    const key = base === ADMIN_BASE ? op.path : `${base}${op.path}`;
    const item = (paths[key] ??= base === ADMIN_BASE ? {} : { servers: [{ url: issuer }] });
    item[op.method] = operationObject(op);
  }
  const doc = {
    openapi: '3.1.0',
    info: {
      title: 'Gatehouse management API',
      version: '1',
      description: 'Applications, people, roles, agents, entities, rules, policy, keys and the audit trail. JSON in and out; `Authorization: Bearer <GATEHOUSE_ADMIN_TOKEN>`.',
    },
    servers: [{ url: `${issuer}${ADMIN_BASE}` }],
    security: [{ adminToken: [] }],
    paths,
    components: {
      securitySchemes: { adminToken: { type: 'http', scheme: 'bearer', description: 'GATEHOUSE_ADMIN_TOKEN' } },
      schemas: { Error: errorBody },
    },
  };
  cached = { size: operations.size, issuer, doc };
  return doc;
}
