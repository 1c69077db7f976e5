import { isIP } from 'node:net';
import { existsSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { z } from 'zod';

/** One line naming the variable: start-up stops with it, never half-configured. */
export class ConfigError extends Error {
  constructor(readonly variable: string, message: string, options?: { cause?: unknown }) {
    super(`${variable}: ${message}`, options);
    this.name = 'ConfigError';
  }
}

export interface Config {
  port: number;
  issuer: string;
  /** true when GATEHOUSE_ISSUER was not given: it follows the port actually bound */
  issuerDefaulted: boolean;
  /** host name of the issuer without the port: the trust domain of agent SPIFFE IDs */
  issuerHost: string;
  dbFile: string;
  /** `postgres://...`: PostgreSQL instead of the SQLite file (GATEHOUSE_DATABASE_URL) */
  databaseUrl: string | undefined;
  /** PostgreSQL: the longest wait for a connection and the longest statement, in ms (GATEHOUSE_DATABASE_TIMEOUT_MS) */
  databaseTimeoutMs: number;
  policyDir: string;
  /** context fields an audit record keeps as a digest, not their value (GATEHOUSE_AUDIT_REDACT_CONTEXT=field,field) */
  auditRedactContext: string[];
  adminToken: string | undefined;
  projectFile: string | undefined;
  logLevel: string;
  secret: string | undefined;
  workers: number;
  /** On SIGTERM, how long /healthz answers 503 `draining` while the process still serves, before it stops listening (GATEHOUSE_DRAIN_NOTICE_MS, default 0) */
  drainNoticeMs: number;
  /** GET /metrics: the bearer token a scraper sends (GATEHOUSE_METRICS_TOKEN); the management API's token is accepted too */
  metricsToken: string | undefined;
  /** GET /metrics without authentication (GATEHOUSE_METRICS_OPEN=true) */
  metricsOpen: boolean;
  /** `required`: every DPoP proof must carry a nonce this service issued (GATEHOUSE_DPOP_NONCE; default `off`: a nonce is checked only when sent) */
  dpopNonce: 'off' | 'required';
  /** the agent endpoints' request limits (GATEHOUSE_AGENT_RATE_LIMIT, GATEHOUSE_ADDRESS_RATE_LIMIT, GATEHOUSE_TRUSTED_PROXIES) */
  agentRequestLimits: { perAgent: number; perAddress: number; trustedProxies: string[] };
  /**
   * Outbound fetches (a trusted issuer's JWKS) may reach loopback, private and link-local
   * addresses (GATEHOUSE_OUTBOUND_ALLOW_PRIVATE=true; the default under NODE_ENV=development)
   */
  outboundAllowPrivate: boolean;
  /**
   * Destinations that may be private although outboundAllowPrivate is off: host names or
   * host:port, compared with the URL's host (GATEHOUSE_OUTBOUND_ALLOW_HOSTS, comma-separated)
   */
  outboundAllowHosts: string[];
  /** audit records older than this many days are pruned behind a signed checkpoint (GATEHOUSE_AUDIT_RETENTION_DAYS); undefined: kept for ever */
  auditRetentionDays: number | undefined;
  /** An AuthZEN search decides at most this many candidates per request (GATEHOUSE_AUTHZEN_SEARCH_MAX_CANDIDATES) */
  authzenSearchMaxCandidates: number;
  /** The sign-in strength the console requires (GATEHOUSE_CONSOLE_SIGN_IN_STRENGTH): `any`, `mfa` or `passkey` */
  consoleSignInStrength: 'any' | 'mfa' | 'passkey';
}

/** GATEHOUSE_SECRET and GATEHOUSE_ADMIN_TOKEN, when set, are at least this long (outside NODE_ENV=development). */
export const MIN_SECRET_LENGTH = 32;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const fields = {
  PORT: z.coerce.number().int().min(0).max(65535),
  GATEHOUSE_ISSUER: z
    .string()
    .url()
    .refine((u) => /^https?:\/\//.test(u), 'must be an http or https URL')
    .refine((u) => !u.endsWith('/'), 'must not end with a slash')
    .refine((u) => URL.canParse(u) && !new URL(u).search && !new URL(u).hash, 'must have no query or fragment'),
  GATEHOUSE_DB: z.string().min(1),
  GATEHOUSE_POLICY_DIR: z.string().min(1),
  GATEHOUSE_ADMIN_TOKEN: z.string().min(1).optional(),
  GATEHOUSE_PROJECT_FILE: z.string().min(1).optional(),
  LOG_LEVEL: z.enum(LOG_LEVELS),
  GATEHOUSE_SECRET: z.string().min(1).optional(),
  GATEHOUSE_WORKERS: z.coerce.number().int().min(1).max(64),
  GATEHOUSE_DATABASE_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000),
  GATEHOUSE_DRAIN_NOTICE_MS: z.coerce.number().int().min(0).max(120_000),
  GATEHOUSE_METRICS_TOKEN: z.string().min(1).optional(),
  GATEHOUSE_METRICS_OPEN: z.enum(['true', 'false']),
  GATEHOUSE_DPOP_NONCE: z.enum(['off', 'required']),
  GATEHOUSE_OUTBOUND_ALLOW_PRIVATE: z.enum(['true', 'false']),
  GATEHOUSE_OUTBOUND_ALLOW_HOSTS: z
    .string()
    .transform((v) => v.split(',').map((h) => h.trim().toLowerCase()).filter(Boolean))
    .refine((list) => list.every((h) => URL.canParse(`http://${h}/`) && new URL(`http://${h}/`).host === h), 'must be a comma-separated list of host or host:port'),
  GATEHOUSE_AUDIT_RETENTION_DAYS: z.coerce.number().int().min(1).max(36_500).optional(),
  GATEHOUSE_CONSOLE_SIGN_IN_STRENGTH: z.enum(['any', 'mfa', 'passkey']),
  GATEHOUSE_AUTHZEN_SEARCH_MAX_CANDIDATES: z.coerce.number().int().min(1).max(10_000_000),
  GATEHOUSE_AGENT_RATE_LIMIT: z.coerce.number().int().min(0).max(1_000_000),
  GATEHOUSE_ADDRESS_RATE_LIMIT: z.coerce.number().int().min(0).max(1_000_000),
  GATEHOUSE_TRUSTED_PROXIES: z
    .string()
    .transform((v) => v.split(',').map((a) => a.trim()).filter(Boolean))
    .refine((list) => list.every((a) => isIP(a) !== 0), 'must be a comma-separated list of IP addresses'),
};

function parseVar<T>(name: keyof typeof fields, raw: string | undefined, fallback?: string): T {
  const value = raw === undefined || raw === '' ? fallback : raw;
  const schema = fields[name];
  const result = schema.safeParse(value);
  if (!result.success) {
    const msg = result.error.issues[0]?.message ?? 'invalid value';
    throw new ConfigError(name, `${msg} (got ${JSON.stringify(value ?? null)})`);
  }
  return result.data as T;
}

/**
 * GATEHOUSE_DATABASE_URL: a postgres:// (or postgresql://) URL naming a host. The value is
 * never echoed: it may hold a password.
 */
export function parseDatabaseUrl(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  const fail = (why: string) => new ConfigError('GATEHOUSE_DATABASE_URL', why);
  if (!URL.canParse(raw)) throw fail('not a URL (expected postgres://user:password@host:5432/database)');
  const u = new URL(raw);
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') throw fail(`must be a postgres:// URL (got a ${u.protocol}// URL)`);
  if (!u.hostname && !u.searchParams.get('host')) throw fail('names no host (expected postgres://user:password@host:5432/database)');
  return raw;
}

/**
 * Reads the configuration (the variables the README lists) from an environment. Pure apart from
 * the checks on the policy directory and project file, which must be readable.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): Config {
  const port = parseVar<number>('PORT', env.PORT, '3000');
  const issuer = parseVar<string>('GATEHOUSE_ISSUER', env.GATEHOUSE_ISSUER, `http://localhost:${port}`);
  const dbFile = resolve(cwd, parseVar<string>('GATEHOUSE_DB', env.GATEHOUSE_DB, './data/gatehouse.db'));
  const policyDir = resolve(cwd, parseVar<string>('GATEHOUSE_POLICY_DIR', env.GATEHOUSE_POLICY_DIR, './policies'));
  if (!existsSync(policyDir) || !statSync(policyDir).isDirectory()) {
    throw new ConfigError('GATEHOUSE_POLICY_DIR', `not a readable directory: ${policyDir}`);
  }
  const projectFileRaw = parseVar<string | undefined>('GATEHOUSE_PROJECT_FILE', env.GATEHOUSE_PROJECT_FILE);
  const projectFile = projectFileRaw ? resolve(cwd, projectFileRaw) : undefined;
  if (projectFile && !existsSync(projectFile)) {
    throw new ConfigError('GATEHOUSE_PROJECT_FILE', `file not found: ${projectFile}`);
  }
  const databaseUrl = parseDatabaseUrl(env.GATEHOUSE_DATABASE_URL);
  const adminToken = parseVar<string | undefined>('GATEHOUSE_ADMIN_TOKEN', env.GATEHOUSE_ADMIN_TOKEN);
  const secret = parseVar<string | undefined>('GATEHOUSE_SECRET', env.GATEHOUSE_SECRET);
  const metricsToken = parseVar<string | undefined>('GATEHOUSE_METRICS_TOKEN', env.GATEHOUSE_METRICS_TOKEN);
  // Short secrets are guessable; a development machine may use them on purpose.
  if (env.NODE_ENV !== 'development') {
    for (const [name, value] of [['GATEHOUSE_SECRET', secret], ['GATEHOUSE_ADMIN_TOKEN', adminToken], ['GATEHOUSE_METRICS_TOKEN', metricsToken]] as const) {
      if (value !== undefined && value.length < MIN_SECRET_LENGTH) {
        throw new ConfigError(name, `must be at least ${MIN_SECRET_LENGTH} characters (got ${value.length}; NODE_ENV=development allows shorter)`);
      }
    }
  }
  // Instances share the database but not a key file: the key that seals private keys must be given.
  if (databaseUrl && !secret) {
    throw new ConfigError('GATEHOUSE_SECRET', 'required with GATEHOUSE_DATABASE_URL: every instance seals and opens the signing keys with it');
  }
  return {
    port,
    issuer,
    issuerDefaulted: !env.GATEHOUSE_ISSUER,
    issuerHost: new URL(issuer).hostname,
    dbFile,
    databaseUrl,
    databaseTimeoutMs: parseVar<number>('GATEHOUSE_DATABASE_TIMEOUT_MS', env.GATEHOUSE_DATABASE_TIMEOUT_MS, '5000'),
    policyDir,
    auditRedactContext: (env.GATEHOUSE_AUDIT_REDACT_CONTEXT ?? '').split(',').map((f) => f.trim()).filter(Boolean),
    adminToken,
    projectFile,
    logLevel: parseVar<string>('LOG_LEVEL', env.LOG_LEVEL, 'info'),
    secret,
    workers: parseVar<number>('GATEHOUSE_WORKERS', env.GATEHOUSE_WORKERS, String(availableParallelism())),
    drainNoticeMs: parseVar<number>('GATEHOUSE_DRAIN_NOTICE_MS', env.GATEHOUSE_DRAIN_NOTICE_MS, '0'),
    metricsToken,
    metricsOpen: parseVar<string>('GATEHOUSE_METRICS_OPEN', env.GATEHOUSE_METRICS_OPEN, 'false') === 'true',
    dpopNonce: parseVar<'off' | 'required'>('GATEHOUSE_DPOP_NONCE', env.GATEHOUSE_DPOP_NONCE, 'off'),
    agentRequestLimits: {
      perAgent: parseVar<number>('GATEHOUSE_AGENT_RATE_LIMIT', env.GATEHOUSE_AGENT_RATE_LIMIT, '2000'),
      perAddress: parseVar<number>('GATEHOUSE_ADDRESS_RATE_LIMIT', env.GATEHOUSE_ADDRESS_RATE_LIMIT, '5000'),
      trustedProxies: parseVar<string[]>('GATEHOUSE_TRUSTED_PROXIES', env.GATEHOUSE_TRUSTED_PROXIES, ''),
    },
    outboundAllowPrivate:
      parseVar<string>('GATEHOUSE_OUTBOUND_ALLOW_PRIVATE', env.GATEHOUSE_OUTBOUND_ALLOW_PRIVATE, env.NODE_ENV === 'development' ? 'true' : 'false') === 'true',
    auditRetentionDays: parseVar<number | undefined>('GATEHOUSE_AUDIT_RETENTION_DAYS', env.GATEHOUSE_AUDIT_RETENTION_DAYS),
    outboundAllowHosts: parseVar<string[]>('GATEHOUSE_OUTBOUND_ALLOW_HOSTS', env.GATEHOUSE_OUTBOUND_ALLOW_HOSTS, ''),
    consoleSignInStrength: parseVar<'any' | 'mfa' | 'passkey'>('GATEHOUSE_CONSOLE_SIGN_IN_STRENGTH', env.GATEHOUSE_CONSOLE_SIGN_IN_STRENGTH, 'any'),
    authzenSearchMaxCandidates: parseVar<number>('GATEHOUSE_AUTHZEN_SEARCH_MAX_CANDIDATES', env.GATEHOUSE_AUTHZEN_SEARCH_MAX_CANDIDATES, '10000'),
  };
}
