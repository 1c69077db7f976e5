import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { ConfigError } from './config.js';
import type { AppContext } from './context.js';
import { sha256, verifyPassword } from './crypto/hash.js';
import { ProtocolError } from './errors.js';
import { createAgent, updateAgent } from './admin/agents.js';
import { createApplication, updateApplication, putGrant, assignUser, authzenTermsOf } from './admin/applications.js';
import { putRole } from './admin/roles.js';
import { createRule, disableRule, enableRule, updateRule, validateAndRecord } from './admin/rules.js';
import { putEntity } from './admin/entities.js';
import { authorizationDetailsTypesSection } from './admin/authorization-details-types.js';
import { relationModel } from './authz/relationships.js';
import { relationshipProblem } from './admin/relationships.js';
import { relationshipText } from './policy/relations/tuple.js';
import { agentCreate, projectApplication, projectEntity, projectRule, relationship, roleCreate, userCreate } from './admin/schemas.js';
import { defaultAgentId } from './admin/spiffe.js';
import { createUser, updateUser } from './admin/users.js';
import { mcpUpstreamsSection } from './mcp/project-section.js';
import { samlConnectionsSection } from './saml/project-section.js';

/**
 * GATEHOUSE_PROJECT_FILE: the management API's objects in one JSON file, applied at start,
 * idempotently: each object is found by its key (below), created when absent and brought
 * to the file's values when present, so applying the file twice leaves one copy.
 *
 * A section is one entry of `projectSections`: its key in the file, the zod schema of one
 * item (the API's own), and how to apply a list of them. Sections apply in table order.
 */
export interface ProjectSection<T = unknown> {
  key: string;
  item: z.ZodType<T>;
  apply(ctx: AppContext, items: T[]): Promise<void> | void;
}

export const defineSection = <T>(s: ProjectSection<T>): ProjectSection => s as unknown as ProjectSection;

type ProjectApplication = z.output<typeof projectApplication>;
type ProjectUser = z.output<typeof projectUser>;
type ProjectRule = z.output<typeof projectRule>;

const projectUser = userCreate;

const usersSection = defineSection<ProjectUser>({
  key: 'users', // by id when given, else by email
  item: projectUser,
  async apply(ctx, items) {
    for (const u of items) {
      const cur = (u.id && await ctx.store.users.get(u.id)) || (!u.id ? await ctx.store.users.getByEmail(u.email) : undefined);
      if (!cur) {
        await createUser(ctx, u);
        continue;
      }
      const creds = (await ctx.store.users.credentialsById(cur.id))!;
      // A password is only re-hashed when it changed: a restart must not churn (or clear a compromise mark).
      const samePassword = await verifyPassword(u.password, creds.password_hash);
      const sameTotp = u.totp_secret
        ? creds.totp_secret_enc !== null && ctx.box.open(creds.totp_secret_enc) === u.totp_secret.replace(/[\s=]/g, '').toUpperCase()
        : creds.totp_secret_enc === null;
      await updateUser(ctx, cur.id, {
        email: u.email,
        name: u.name,
        email_verified: u.email_verified,
        picture: u.picture ?? null,
        locale: u.locale ?? null,
        groups: u.groups,
        roles: u.roles,
        attributes: u.attributes,
        ...(samePassword ? {} : { password: u.password }),
        ...(sameTotp ? {} : { totp_secret: u.totp_secret ?? null }),
      });
    }
  },
});

const rolesSection = defineSection<z.output<typeof roleCreate>>({
  key: 'roles', // by name
  item: roleCreate,
  async apply(ctx, items) {
    for (const r of items) {
      const cur = await ctx.store.roles.get(r.name);
      if (!cur || JSON.stringify(cur.permissions) !== JSON.stringify([...new Set(r.permissions)])) await putRole(ctx, r.name, r.permissions);
    }
  },
});

const applicationsSection = defineSection<ProjectApplication>({
  key: 'applications', // by client_id when given, else by name
  item: projectApplication,
  async apply(ctx, items) {
    const ids: string[] = [];
    for (const a of items) {
      const cur = a.client_id ? await ctx.store.applications.get(a.client_id) : (await ctx.store.applications.list()).find((x) => x.name === a.name);
      if (!cur) {
        ids.push((await createApplication(ctx, a)).app.client_id);
        continue;
      }
      const secretDiffers =
        a.client_secret !== undefined && (await ctx.store.applications.getWithSecret(cur.client_id))!.secret_hash !== sha256(a.client_secret);
      await updateApplication(ctx, cur.client_id, {
        name: a.name,
        type: a.type,
        redirect_uris: a.redirect_uris,
        post_logout_redirect_uris: a.post_logout_redirect_uris,
        ...(a.confidential !== undefined ? { confidential: a.confidential } : {}),
        ...(a.refresh_tokens !== undefined ? { refresh_tokens: a.refresh_tokens } : {}),
        first_party: a.first_party,
        require_pushed_authorization_requests: a.require_pushed_authorization_requests ?? false,
        ...(a.dpop_bound_access_tokens !== undefined ? { dpop_bound_access_tokens: a.dpop_bound_access_tokens } : {}),
        ...(secretDiffers ? { client_secret: a.client_secret } : {}),
        ...(a.id_jag_audiences !== undefined ? { id_jag_audiences: a.id_jag_audiences } : {}),
      });
      ids.push(cur.client_id);
    }
    // Grants and assignments once every application exists (a grant may name an API listed later).
    for (const [i, a] of items.entries()) {
      for (const g of a.grants ?? []) await putGrant(ctx, ids[i]!, g.api_client_id, g.scopes, authzenTermsOf(g));
      for (const who of a.assignments ?? []) {
        const user = await ctx.store.users.get(who) ?? await ctx.store.users.getByEmail(who);
        if (!user) throw new ProjectItemError(`applications.${i}.assignments: no user ${who}`);
        await assignUser(ctx, ids[i]!, user.id);
      }
    }
  },
});

const agentsSection = defineSection<z.output<typeof agentCreate>>({
  key: 'agents', // by agent_id (the default one when not given)
  item: agentCreate,
  async apply(ctx, items) {
    for (const a of items) {
      const id = a.agent_id ?? defaultAgentId(ctx.config.issuerHost, a.name);
      if (!(await ctx.store.agents.get(id))) await createAgent(ctx, a);
      else await updateAgent(ctx, id, { name: a.name, mode: a.mode, public_jwk: a.public_jwk, roles: a.roles, capabilities: a.capabilities, attributes: a.attributes,
        ...(a.dpop_bound_access_tokens !== undefined ? { dpop_bound_access_tokens: a.dpop_bound_access_tokens } : {}) });
    }
  },
});

const entitiesSection = defineSection<z.output<typeof projectEntity>>({
  key: 'entities', // by type and id; an entity whose attributes are already the file's is left alone
  item: projectEntity,
  async apply(ctx, items) {
    for (const e of items) {
      const cur = await ctx.store.entities.get(e.type, e.id);
      if (!cur || JSON.stringify(cur.attributes) !== JSON.stringify(e.attributes)) await putEntity(ctx, e.type, e.id, e.attributes);
    }
  },
});

const relationshipsSection = defineSection<z.output<typeof relationship>>({
  key: 'relationships', // by object, relation and subject; one already stored as the file has it is left alone
  item: relationship,
  async apply(ctx, items) {
    // Checked against the model of the policy files just loaded; written all or nothing.
    const model = relationModel((await ctx.policy.state()).set);
    for (const [i, r] of items.entries()) {
      const why = relationshipProblem(model, r);
      if (why) throw new ProjectItemError(`relationships.${i} (${relationshipText(r)}): ${why}`);
    }
    await ctx.store.relationships.apply(items, []);
  },
});

const rulesSection = defineSection<ProjectRule>({
  key: 'rules', // by name; `state` (optional) is brought about: live is validated first
  item: projectRule,
  async apply(ctx, items) {
    for (const [i, r] of items.entries()) {
      const { state, id, ...content } = r;
      const cur = await ctx.store.rules.getByName(r.name);
      const rule = cur ? await updateRule(ctx, cur.id, { ...content, condition: content.condition ?? null }) : await createRule(ctx, content, id);
      if (state === 'live' && rule.state !== 'live') {
        const check = await validateAndRecord(ctx, rule.id);
        if (!check.valid) throw new ProjectItemError(`rules.${i} (${r.name}) does not validate: ${check.errors.join('; ')}`);
        await enableRule(ctx, rule.id);
      } else if (state === 'disabled') await disableRule(ctx, rule.id);
    }
  },
});

/** The sections in the order they apply: roles and people before the things that refer to them. */
export const projectSections: ProjectSection[] = [rolesSection, usersSection, applicationsSection, agentsSection, entitiesSection, relationshipsSection, rulesSection, defineSection(authorizationDetailsTypesSection), defineSection(mcpUpstreamsSection), defineSection(samlConnectionsSection)];

/** Adds a section (for example `mcp_upstreams`) after the built-in ones. */
export function registerProjectSection(section: ProjectSection): void {
  const at = projectSections.findIndex((s) => s.key === section.key);
  if (at >= 0) projectSections[at] = section;
  else projectSections.push(section);
}

class ProjectItemError extends Error {}

function fileSchema() {
  return z
    .object(Object.fromEntries(projectSections.map((s) => [s.key, z.array(s.item).optional()])))
    .catchall(z.unknown())
    .superRefine((v, c) => {
      for (const key of Object.keys(v)) {
        if (!projectSections.some((s) => s.key === key) && key !== '$schema') {
          c.addIssue({ code: 'custom', path: [key], message: `unknown section (known: ${projectSections.map((s) => s.key).join(', ')})` });
        }
      }
    });
}

const fail = (message: string) => new ConfigError('GATEHOUSE_PROJECT_FILE', message.replace(/\s*\n\s*/g, ' '));

export async function applyProjectFile(ctx: AppContext, file: string): Promise<void> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    throw fail(`${file}: ${(err as Error).message}`);
  }
  // The whole file is checked before anything is applied.
  const parsed = fileSchema().safeParse(raw);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    const more = parsed.error.issues.length > 1 ? ` (and ${parsed.error.issues.length - 1} more)` : '';
    throw fail(`${file}: ${first.path.map(String).join('.') || 'the file'}: ${first.message}${more}`);
  }
  const data = parsed.data as Record<string, unknown[] | undefined>;
  for (const section of projectSections) {
    const items = data[section.key];
    if (!items?.length) continue;
    try {
      await section.apply(ctx, items);
    } catch (err) {
      if (err instanceof ProtocolError) throw fail(`${file}: ${section.key}: ${err.description ?? err.error}`);
      if (err instanceof ProjectItemError) throw fail(`${file}: ${err.message}`);
      throw err;
    }
  }
  ctx.logger.info({ file, sections: projectSections.filter((s) => data[s.key]?.length).map((s) => s.key) }, 'project file applied');
}
