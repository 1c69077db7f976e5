/**
 * The applications of the OOPSLA 2024 Cedar paper (Google Drive, GitHub, TinyTodo) as data for
 * bench/relationships.ts: for each, a seeded generator of entity graphs of the shape the paper's
 * generators draw (every possible edge present with one probability), written out twice: as
 * Cedar entities, and as the OpenFGA relationships that say the same thing; and the requests
 * (principal, action, resource) drawn at random over a graph, each with the relation of the
 * OpenFGA model that answers it.
 */

/** A seeded RNG (mulberry32): the same seed draws the same graphs on every run. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Uid { type: string; id: string }
export interface CedarEntity { uid: Uid; attrs: Record<string, unknown>; parents: Uid[] }
/** What a request asks, both ways: Cedar's (principal, action, resource) and the relation check. */
export interface AppRequest {
  principal: Uid;
  action: Uid;
  resource: Uid;
  /** The OpenFGA side: does `subject` hold `relation` on `object`? */
  object: string;
  relation: string;
  subject: string;
}
export interface Graph {
  entities: CedarEntity[];
  /** The same graph as relationships, in OpenFGA's text form `object#relation@subject`. */
  tuples: string[];
  requests(n: number, random: () => number): AppRequest[];
}

const ref = (type: string, id: string) => ({ __entity: { type, id } });
const pick = <T>(xs: readonly T[], random: () => number): T => xs[Math.floor(random() * xs.length)]!;
const range = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}_${i}`);
/** `n` entities split into `k` kinds, at least one of each. */
const share = (n: number, k: number) => Math.max(1, Math.round(n / k));

// ---- Google Drive: users, groups, documents, folders; viewing through View entities -------------

/**
 * Cedar: a user's `documentsAndFoldersWithViewAccess` is its View entity; a document or folder
 * viewable by a user or a group has that View among its parents, and a group's View has its
 * members' Views as parents. OpenFGA: member, owner, parent and viewer relationships, a public
 * document viewable by `user:*`.
 */
export function gdrive(n: number, p: number, random: () => number): Graph {
  const [users, groups, docs, folders] = [range(share(n, 4), 'user'), range(share(n, 4), 'group'), range(share(n, 4), 'doc'), range(share(n, 4), 'folder')];
  const entities: CedarEntity[] = [];
  const tuples: string[] = [];
  const members = new Map<string, string[]>(groups.map((g) => [g, []]));
  for (const u of users) {
    const parents: Uid[] = [];
    for (const g of groups) if (random() < p) { parents.push({ type: 'Group', id: g }); members.get(g)!.push(u); tuples.push(`group:${g}#member@user:${u}`); }
    const ownedDocuments = docs.filter(() => random() < p);
    const ownedFolders = folders.filter(() => random() < p);
    for (const d of ownedDocuments) tuples.push(`doc:${d}#owner@user:${u}`);
    for (const f of ownedFolders) tuples.push(`folder:${f}#owner@user:${u}`);
    entities.push({
      uid: { type: 'User', id: u },
      attrs: {
        documentsAndFoldersWithViewAccess: ref('View', `User ${u}`),
        ownedDocuments: ownedDocuments.map((d) => ref('Document', d)),
        ownedFolders: ownedFolders.map((f) => ref('Folder', f)),
      },
      parents,
    });
    entities.push({ uid: { type: 'View', id: `User ${u}` }, attrs: {}, parents: [] });
  }
  for (const g of groups) {
    entities.push({ uid: { type: 'Group', id: g }, attrs: {}, parents: [] });
    entities.push({ uid: { type: 'View', id: `Group ${g}` }, attrs: {}, parents: members.get(g)!.map((u) => ({ type: 'View', id: `User ${u}` })) });
  }
  // Parents of a document or folder: folders it is in, then the users and groups that may view it.
  const viewParents = (object: string, parents: Uid[]) => {
    for (const u of users) if (random() < p) { parents.push({ type: 'View', id: `User ${u}` }); tuples.push(`${object}#viewer@user:${u}`); }
    for (const g of groups) if (random() < p) { parents.push({ type: 'View', id: `Group ${g}` }); tuples.push(`${object}#viewer@group:${g}#member`); }
  };
  for (const d of docs) {
    const parents: Uid[] = [];
    for (const f of folders) if (random() < p) { parents.push({ type: 'Folder', id: f }); tuples.push(`doc:${d}#parent@folder:${f}`); }
    viewParents(`doc:${d}`, parents);
    const isPublic = random() < 0.5;
    if (isPublic) tuples.push(`doc:${d}#viewer@user:*`);
    entities.push({ uid: { type: 'Document', id: d }, attrs: { isPublic }, parents });
  }
  folders.forEach((f, i) => {
    const parents: Uid[] = [];
    // Only folders with smaller numbers: the folders form a DAG.
    for (const g of folders.slice(0, i)) if (random() < p) { parents.push({ type: 'Folder', id: g }); tuples.push(`folder:${f}#parent@folder:${g}`); }
    viewParents(`folder:${f}`, parents);
    entities.push({ uid: { type: 'Folder', id: f }, attrs: {}, parents });
  });
  const onDocs: [string, string][] = [['read', 'can_read'], ['write', 'can_write'], ['share', 'can_share'], ['changeOwner', 'can_change_owner']];
  return {
    entities,
    tuples,
    requests: (count, r) => Array.from({ length: count }, () => {
      const u = pick(users, r);
      // Four of the five actions apply to documents, createDocument to folders.
      const k = Math.floor(r() * 5);
      if (k === 4) {
        const f = pick(folders, r);
        return { principal: { type: 'User', id: u }, action: { type: 'Action', id: 'createDocument' }, resource: { type: 'Folder', id: f }, object: `folder:${f}`, relation: 'can_create_file', subject: `user:${u}` };
      }
      const d = pick(docs, r);
      const [action, relation] = onDocs[k]!;
      return { principal: { type: 'User', id: u }, action: { type: 'Action', id: action }, resource: { type: 'Document', id: d }, object: `doc:${d}`, relation, subject: `user:${u}` };
    }),
  };
}

// ---- GitHub: repositories, users, teams, organizations; roles as permission entities ------------

const REPO_ROLES = [['readers', 'reader'], ['triagers', 'triager'], ['writers', 'writer'], ['maintainers', 'maintainer'], ['admins', 'admin']] as const;
const ORG_ROLES = [['readers', 'repo_reader'], ['writers', 'repo_writer'], ['admins', 'repo_admin']] as const;

/**
 * Cedar: a repository's role is a RepoPermission entity, an organization's an OrgPermission;
 * holding a role is having it among one's ancestors (a user, through teams, nested teams or an
 * organization). OpenFGA: the same roles as relations on `repo` and `organization`, teams by
 * `team#member` usersets.
 */
export function github(n: number, p: number, random: () => number): Graph {
  const [repos, users, teams, orgs] = [range(share(n, 4), 'repo'), range(share(n, 4), 'user'), range(share(n, 4), 'team'), range(share(n, 4), 'org')];
  const entities: CedarEntity[] = [];
  const tuples: string[] = [];
  // The paper's draws: a repository role uniformly among five, an organization role among three.
  const repoRole = () => REPO_ROLES[Math.min(4, Math.floor(random() * 5))]!;
  const orgRole = () => ORG_ROLES[Math.floor(random() * 3)]!;
  for (const o of orgs) {
    const parents: Uid[] = [];
    for (const other of orgs) if (random() < p) {
      const [suffix, relation] = orgRole();
      parents.push({ type: 'OrgPermission', id: `${other}_${suffix}` });
      tuples.push(`organization:${other}#${relation}@organization:${o}#member`);
    }
    entities.push({ uid: { type: 'Organization', id: o }, attrs: { readers: ref('OrgPermission', `${o}_readers`), writers: ref('OrgPermission', `${o}_writers`), admins: ref('OrgPermission', `${o}_admins`) }, parents });
    for (const [suffix] of ORG_ROLES) entities.push({ uid: { type: 'OrgPermission', id: `${o}_${suffix}` }, attrs: {}, parents: [] });
  }
  for (const r of repos) {
    const owner = pick(orgs, random);
    tuples.push(`repo:${r}#owner@organization:${owner}`);
    const attrs: Record<string, unknown> = { owner: ref('Organization', owner) };
    for (const [suffix] of REPO_ROLES) {
      attrs[suffix] = ref('RepoPermission', `${r}_${suffix}`);
      entities.push({ uid: { type: 'RepoPermission', id: `${r}_${suffix}` }, attrs: {}, parents: [] });
    }
    entities.push({ uid: { type: 'Repository', id: r }, attrs, parents: [] });
  }
  teams.forEach((t, i) => {
    const parents: Uid[] = [];
    // Only teams with smaller numbers: the teams form a DAG.
    for (const other of teams.slice(0, i)) if (random() < p) { parents.push({ type: 'Team', id: other }); tuples.push(`team:${other}#member@team:${t}#member`); }
    for (const r of repos) if (random() < p) {
      const [suffix, relation] = repoRole();
      parents.push({ type: 'RepoPermission', id: `${r}_${suffix}` });
      tuples.push(`repo:${r}#${relation}@team:${t}#member`);
    }
    entities.push({ uid: { type: 'Team', id: t }, attrs: {}, parents });
  });
  for (const u of users) {
    const parents: Uid[] = [];
    for (const r of repos) if (random() < p) {
      const [suffix, relation] = repoRole();
      parents.push({ type: 'RepoPermission', id: `${r}_${suffix}` });
      tuples.push(`repo:${r}#${relation}@user:${u}`);
    }
    for (const t of teams) if (random() < p) { parents.push({ type: 'Team', id: t }); tuples.push(`team:${t}#member@user:${u}`); }
    for (const o of orgs) {
      if (random() < p) { parents.push({ type: 'Organization', id: o }); tuples.push(`organization:${o}#member@user:${u}`); }
      if (random() < p) {
        const [suffix, relation] = orgRole();
        parents.push({ type: 'OrgPermission', id: `${o}_${suffix}` });
        tuples.push(`organization:${o}#${relation}@user:${u}`);
      }
    }
    entities.push({ uid: { type: 'User', id: u }, attrs: {}, parents });
  }
  const actions = [['read', 'reader'], ['triage', 'triager'], ['write', 'writer'], ['maintain', 'maintainer'], ['admin', 'admin']] as const;
  return {
    entities,
    tuples,
    requests: (count, r) => Array.from({ length: count }, () => {
      const u = pick(users, r), repo = pick(repos, r), [action, relation] = pick(actions, r);
      return { principal: { type: 'User', id: u }, action: { type: 'Action', id: action }, resource: { type: 'Repository', id: repo }, object: `repo:${repo}`, relation, subject: `user:${u}` };
    }),
  };
}

// ---- TinyTodo: users, teams, lists of one application ------------------------------------------

/**
 * Cedar: a list names its owner and a reader and an editor team; users and teams are in teams.
 * OpenFGA: owner, reader and editor relationships (teams as `team#member`), every user a member
 * of the application (`user:*`), which is what lets anyone create and see lists.
 */
export function tinytodo(n: number, p: number, random: () => number): Graph {
  const [users, teams, lists] = [range(share(n, 3), 'user'), range(share(n, 3), 'team'), range(share(n, 3), 'list')];
  const app = { type: 'Application', id: 'TinyTodo' };
  const entities: CedarEntity[] = [{ uid: app, attrs: {}, parents: [] }];
  const tuples: string[] = ['application:TinyTodo#member@user:*'];
  for (const u of users) {
    const parents: Uid[] = [];
    for (const t of teams) if (random() < p) { parents.push({ type: 'Team', id: t }); tuples.push(`team:${t}#member@user:${u}`); }
    entities.push({ uid: { type: 'User', id: u }, attrs: {}, parents: [...parents, app] });
  }
  teams.forEach((t, i) => {
    const parents: Uid[] = [];
    for (const other of teams.slice(0, i)) if (random() < p) { parents.push({ type: 'Team', id: other }); tuples.push(`team:${other}#member@team:${t}#member`); }
    entities.push({ uid: { type: 'Team', id: t }, attrs: {}, parents: [...parents, app] });
  });
  for (const l of lists) {
    const owner = pick(users, random), readers = pick(teams, random), editors = pick(teams, random);
    tuples.push(`list:${l}#owner@user:${owner}`, `list:${l}#reader@team:${readers}#member`, `list:${l}#editor@team:${editors}#member`);
    const tasks = Array.from({ length: Math.floor(random() * 51) }, () => ({ name: `task_${Math.floor(random() * 1e6)}`, id: Math.floor(random() * 1e6), state: random() < 0.5 ? 'Checked' : 'Unchecked' }));
    entities.push({ uid: { type: 'List', id: l }, attrs: { name: l, owner: ref('User', owner), readers: ref('Team', readers), editors: ref('Team', editors), tasks }, parents: [app] });
  }
  const onLists = [['GetList', 'get_list'], ['UpdateList', 'update_list'], ['DeleteList', 'delete_list'], ['CreateTask', 'create_task'], ['UpdateTask', 'update_task'], ['DeleteTask', 'delete_task'], ['EditShares', 'edit_shares']] as const;
  const onApp = [['CreateList', 'create_list'], ['GetLists', 'get_lists']] as const;
  return {
    entities,
    tuples,
    requests: (count, r) => Array.from({ length: count }, () => {
      const u = pick(users, r);
      const k = Math.floor(r() * (onLists.length + onApp.length));
      if (k >= onLists.length) {
        const [action, relation] = onApp[k - onLists.length]!;
        return { principal: { type: 'User', id: u }, action: { type: 'Action', id: action }, resource: app, object: 'application:TinyTodo', relation, subject: `user:${u}` };
      }
      const l = pick(lists, r), [action, relation] = onLists[k]!;
      return { principal: { type: 'User', id: u }, action: { type: 'Action', id: action }, resource: { type: 'List', id: l }, object: `list:${l}`, relation, subject: `user:${u}` };
    }),
  };
}

export const APPS = { gdrive, github, tinytodo } as const;
export type AppName = keyof typeof APPS;
