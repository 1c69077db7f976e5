import type { Db } from './db.js';
import { now, parseJson } from './util.js';

export interface Role { name: string; permissions: string[]; created_at: number; updated_at: number }
interface Row { name: string; permissions: string; created_at: number; updated_at: number }
const toRole = (r: Row): Role => ({ ...r, permissions: parseJson(r.permissions, []) });

export function rolesStore(db: Db) {
  const upsert = db.prepare(
    `INSERT INTO roles (name, permissions, created_at, updated_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (name) DO UPDATE SET permissions = excluded.permissions, updated_at = excluded.updated_at`,
  );
  const insert = db.prepare('INSERT INTO roles (name, permissions, created_at, updated_at) VALUES (?, ?, ?, ?)');
  const byName = db.prepare<[string], Row>('SELECT * FROM roles WHERE name = ?');
  const list = db.prepare<[], Row>('SELECT * FROM roles ORDER BY name');
  const del = db.prepare('DELETE FROM roles WHERE name = ?');
  return {
    create(name: string, permissions: string[]): Role {
      const t = now();
      insert.run(name, JSON.stringify(permissions), t, t);
      return toRole(byName.get(name)!);
    },
    put(name: string, permissions: string[]): Role {
      const t = now();
      upsert.run(name, JSON.stringify(permissions), t, t);
      return toRole(byName.get(name)!);
    },
    get(name: string): Role | undefined {
      const r = byName.get(name);
      return r && toRole(r);
    },
    list: (): Role[] => list.all().map(toRole),
    delete: (name: string): boolean => del.run(name).changes === 1,
    /** Every permission the named roles carry; unknown role names give nothing. */
    permissionsOf(roleNames: string[]): string[] {
      const out = new Set<string>();
      for (const n of roleNames) for (const p of this.get(n)?.permissions ?? []) out.add(p);
      return [...out];
    },
  };
}
export type RolesStore = ReturnType<typeof rolesStore>;
