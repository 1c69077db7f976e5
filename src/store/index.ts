import { agentsStore } from './agents.js';
import { agentAuthStore } from './agent-auth.js';
import { applicationsStore } from './applications.js';
import { clientRequestsStore } from './client-requests.js';
import { auditStore } from './audit.js';
import { delegationsStore } from './delegations.js';
import { dpopStore } from './dpop.js';
import { entitiesStore } from './entities.js';
import { idJagStore } from './id-jag.js';
import { perTurnFeed, type ChangeFeed } from './changes.js';
import { keysStore } from './keys.js';
import { leasesStore } from './leases.js';
import { mcpStore } from './mcp.js';
import { oauthStore } from './oauth.js';
import { policyVersionsStore } from './policy-versions.js';
import { rateLimitsStore } from './rate-limits.js';
import { relationshipsStore } from './relationships.js';
import { rolesStore } from './roles.js';
import { samlStore } from './saml.js';
import { rulesStore } from './rules.js';
import { sessionsStore } from './sessions.js';
import { settingsStore } from './settings.js';
import { ssfStore } from './ssf.js';
import { usersStore } from './users.js';
import { usageStore } from './usage.js';
import { webauthnStore } from './passkeys.js';
import type { Sql, SqlDatabase } from './sql.js';
import { systemClock, type Clock } from '../clock.js';

/**
 * Every table is reached through one of these modules; the rest of the code writes no SQL.
 * Each area adds its module here (one line) and its migration file in ./migrations. A module
 * is written once against `Sql`, so it runs on SQLite and on PostgreSQL alike. Every time a
 * module writes or compares is read from `clock`, the application's one clock.
 */
function modules(sql: Sql, changes: ChangeFeed, clock: Clock) {
  return {
    settings: settingsStore(sql, changes),
    keys: keysStore(sql),
    applications: applicationsStore(sql, changes, clock),
    users: usersStore(sql, clock),
    roles: rolesStore(sql, clock),
    agents: agentsStore(sql, clock),
    agentAuth: agentAuthStore(sql, clock),
    delegations: delegationsStore(sql, clock),
    entities: entitiesStore(sql, clock),
    relationships: relationshipsStore(sql, changes, clock),
    rules: rulesStore(sql, clock),
    sessions: sessionsStore(sql, clock),
    audit: auditStore(sql, clock),
    mcp: mcpStore(sql, clock),
    ssf: ssfStore(sql, clock),
    oauth: oauthStore(sql, clock),
    rateLimits: rateLimitsStore(sql, clock),
    saml: samlStore(sql, clock),
    leases: leasesStore(sql),
    policyVersions: policyVersionsStore(sql, clock),
    usage: usageStore(sql),
    webauthn: webauthnStore(sql, clock),
    dpop: dpopStore(sql, clock),
    idJag: idJagStore(sql, clock),
    clientRequests: clientRequestsStore(sql, changes, clock),
  };
}

export interface Store extends ReturnType<typeof modules> {
  /** The executor this store runs on (inside a transaction: that transaction's). Raw SQL is for src/store and tests only. */
  readonly sql: Sql;
  /** The change counters the in-memory caches follow. */
  readonly changes: ChangeFeed;
  /** The clock every module reads its times from (the application's one clock). */
  readonly clock: Clock;
  /** The database the process opened. */
  readonly database: SqlDatabase;
  /**
   * Runs `fn` in one transaction with `tx`, a store bound to it, and commits when `fn`
   * resolves. The body awaits only calls on `tx` (see Sql.transaction); inside a transaction,
   * `transaction` runs `fn` in the same one.
   */
  transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T>;
  /** Stops the change feed and closes the database. */
  close(): Promise<void>;
}

/**
 * The store over an opened (and migrated) database, with the database's own change feed, on
 * `clock` (default: the system's).
 */
export async function openStore(database: SqlDatabase, clock: Clock = systemClock): Promise<Store> {
  return createStore(database, await database.changeFeed(), clock);
}

export function createStore(database: SqlDatabase, changes: ChangeFeed = perTurnFeed(database), clock: Clock = systemClock): Store {
  // One store per transaction executor: on SQLite there is only ever one, so it is built once.
  const bound = new WeakMap<Sql, Store>();
  const storeOf = (sql: Sql): Store => {
    let store = bound.get(sql);
    if (store) return store;
    const self: Store = {
      sql,
      changes,
      clock,
      database,
      ...modules(sql, changes, clock),
      transaction: <T>(fn: (tx: Store) => Promise<T>): Promise<T> => (sql.inTransaction ? fn(self) : sql.transaction((tx) => fn(storeOf(tx)))),
      close: async () => {
        await changes.close();
        await database.close();
      },
    };
    bound.set(sql, (store = self));
    return store;
  };
  return storeOf(database);
}
