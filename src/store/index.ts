import type { Db } from './db.js';
import { agentsStore } from './agents.js';
import { agentAuthStore } from './agent-auth.js';
import { applicationsStore } from './applications.js';
import { auditStore } from './audit.js';
import { entitiesStore } from './entities.js';
import { keysStore } from './keys.js';
import { mcpStore } from './mcp.js';
import { oauthStore } from './oauth.js';
import { policyVersionsStore } from './policy-versions.js';
import { rateLimitsStore } from './rate-limits.js';
import { rolesStore } from './roles.js';
import { samlStore } from './saml.js';
import { rulesStore } from './rules.js';
import { sessionsStore } from './sessions.js';
import { settingsStore } from './settings.js';
import { ssfStore } from './ssf.js';
import { usersStore } from './users.js';
import { sqliteUsageSql, usageStore } from './usage.js';

/**
 * Every table is reached through one of these modules; the rest of the code writes no SQL.
 * Each area adds its module here (one line) and its migration file in ./migrations.
 */
export function createStore(db: Db) {
  return {
    db,
    /** Runs `fn` in one immediate (write-locking) transaction. */
    transaction<T>(fn: () => T): T {
      return db.inTransaction ? fn() : db.transaction(fn).immediate();
    },
    settings: settingsStore(db),
    keys: keysStore(db),
    applications: applicationsStore(db),
    users: usersStore(db),
    roles: rolesStore(db),
    agents: agentsStore(db),
    agentAuth: agentAuthStore(db),
    entities: entitiesStore(db),
    rules: rulesStore(db),
    sessions: sessionsStore(db),
    audit: auditStore(db),
    mcp: mcpStore(db),
    ssf: ssfStore(db),
    oauth: oauthStore(db),
    rateLimits: rateLimitsStore(db),
    saml: samlStore(db),
    policyVersions: policyVersionsStore(db),
    usage: usageStore(sqliteUsageSql(db)),
  };
}
export type Store = ReturnType<typeof createStore>;
