import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { parseJson, secondsOf } from './util.js';

export interface Role { name: string; permissions: string[]; created_at: number; updated_at: number }
interface Row { name: string; permissions: string; created_at: number; updated_at: number }
const toRole = (r: Row): Role => ({ ...r, permissions: parseJson(r.permissions, []) });

const BY_NAME = 'SELECT * FROM roles WHERE name = ?';

export function rolesStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const get = async (name: string): Promise<Role | undefined> => {
    const r = await sql.get<Row>(BY_NAME, [name]);
    return r && toRole(r);
  };
  return {
    async create(name: string, permissions: string[]): Promise<Role> {
      const t = now();
      await sql.run('INSERT INTO roles (name, permissions, created_at, updated_at) VALUES (?, ?, ?, ?)', [name, JSON.stringify(permissions), t, t]);
      return (await get(name))!;
    },
    async put(name: string, permissions: string[]): Promise<Role> {
      const t = now();
      await sql.run(
        `INSERT INTO roles (name, permissions, created_at, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET permissions = excluded.permissions, updated_at = excluded.updated_at`,
        [name, JSON.stringify(permissions), t, t],
      );
      return (await get(name))!;
    },
    get,
    list: async (): Promise<Role[]> => (await sql.all<Row>('SELECT * FROM roles ORDER BY name')).map(toRole),
    delete: async (name: string): Promise<boolean> => (await sql.run('DELETE FROM roles WHERE name = ?', [name])).changes === 1,
    /** Every permission the named roles carry; unknown role names give nothing. */
    async permissionsOf(roleNames: string[]): Promise<string[]> {
      const out = new Set<string>();
      for (const n of roleNames) for (const p of (await get(n))?.permissions ?? []) out.add(p);
      return [...out];
    },
  };
}
export type RolesStore = ReturnType<typeof rolesStore>;
