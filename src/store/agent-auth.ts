import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { bool, parseJson, secondsOf } from './util.js';

export type ApprovalKind = 'ciba' | 'action';
export type ApprovalState = 'pending' | 'approved' | 'denied' | 'consumed';

export interface Approval {
  id: string;
  kind: ApprovalKind;
  /** as stored; a pending row past `expires_at` is reported as `expired` by `displayState` */
  state: ApprovalState;
  agent_id: string;
  user_id: string | null;
  binding_message: string | null;
  auth_req_enc: string | null;
  scope: string[];
  openid: boolean;
  poll_interval: number | null;
  last_poll_ms: number | null;
  action: string | null;
  resource: string | null;
  context: Record<string, unknown> | null;
  action_key: string | null;
  rule: string | null;
  /** CIBA: the authorization details (RFC 9396) the person is asked to approve */
  authorization_details: Record<string, unknown>[] | null;
  created_at: number;
  expires_at: number;
  decided_at: number | null;
  decided_by: string | null;
  consumed_at: number | null;
}

interface Row extends Omit<Approval, 'scope' | 'openid' | 'context' | 'authorization_details'> {
  scope: string | null;
  authorization_details?: string | null;
  openid: number;
  context: string | null;
  auth_req_hash: string | null;
  seq?: number;
}

const toApproval = (r: Row): Approval => {
  const { auth_req_hash: _h, seq: _s, ...rest } = r;
  return {
    ...rest,
    scope: parseJson<string[]>(r.scope, []),
    openid: bool(r.openid),
    context: parseJson<Record<string, unknown> | null>(r.context, null),
    authorization_details: parseJson<Record<string, unknown>[] | null>(r.authorization_details, null),
  };
};

/** pending past its expiry (at `t`, seconds since the epoch) reads as `expired` */
export const displayState = (a: Approval, t: number): ApprovalState | 'expired' =>
  a.state === 'pending' && a.expires_at <= t ? 'expired' : a.state;

export interface NewCibaRequest {
  id: string;
  agent_id: string;
  user_id: string;
  binding_message: string | null;
  auth_req_hash: string;
  auth_req_enc: string;
  scope: string[];
  openid: boolean;
  poll_interval: number;
  expires_at: number;
  authorization_details?: Record<string, unknown>[] | null;
}

export interface NewActionApproval {
  id: string;
  agent_id: string;
  user_id: string | null;
  action: string;
  resource: string;
  /** canonical JSON of the context */
  context: string;
  action_key: string;
  rule: string | null;
  binding_message: string | null;
  expires_at: number;
}

export type PollOutcome =
  | { kind: 'unknown' }
  | { kind: 'too_soon'; approval: Approval }
  | { kind: 'ok'; approval: Approval };

const BY_ID = 'SELECT * FROM agent_approvals WHERE id = ?';
const BY_AUTH_REQ = 'SELECT * FROM agent_approvals WHERE auth_req_hash = ?';

/** Client assertion replay protection, CIBA requests and approvals. */
export function agentAuthStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  let inserts = 0;
  const purge = async (t: number): Promise<number> => {
    const jtis = await sql.run('DELETE FROM agent_assertion_jtis WHERE expires_at < ?', [t - 60]);
    // Answered or expired requests are kept a day for the administrators' list, then dropped.
    const approvals = await sql.run('DELETE FROM agent_approvals WHERE expires_at < ?', [t - 24 * 60 * 60]);
    return jtis.changes + approvals.changes;
  };
  const byId = async (s: Sql, id: string): Promise<Approval | undefined> => {
    const r = await s.get<Row>(BY_ID, [id]);
    return r && toApproval(r);
  };

  return {
    /**
     * Records a client assertion's jti; false when it was seen before (a replay). One
     * INSERT ... ON CONFLICT DO NOTHING: of two uses at once, on any instance, one inserts.
     */
    async useJti(agentId: string, jti: string, expiresAt: number): Promise<boolean> {
      // Purge now and then: rows are only needed until the assertion itself expires.
      if (++inserts % 500 === 0) await purge(now());
      const r = await sql.run('INSERT INTO agent_assertion_jtis (agent_id, jti, expires_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING', [agentId, jti, expiresAt]);
      return r.changes === 1;
    },
    /** Drops jtis of expired assertions and approvals answered or expired more than a day ago. */
    purgeExpired: (t: number = now()): Promise<number> => purge(t),
    async createCiba(r: NewCibaRequest): Promise<Approval> {
      const t = now();
      await sql.run(
        `INSERT INTO agent_approvals (id, kind, agent_id, user_id, binding_message, auth_req_hash, auth_req_enc, scope, openid, poll_interval, last_poll_ms, authorization_details, created_at, expires_at)
         VALUES (@id, 'ciba', @agent_id, @user_id, @binding_message, @auth_req_hash, @auth_req_enc, @scope, @openid, @poll_interval, @last_poll_ms, @authorization_details, @created_at, @expires_at)`,
        {
          ...r, scope: JSON.stringify(r.scope), openid: r.openid ? 1 : 0, last_poll_ms: clock.now(),
          authorization_details: r.authorization_details ? JSON.stringify(r.authorization_details) : null, created_at: t,
        },
      );
      return (await byId(sql, r.id))!;
    },
    async createAction(r: NewActionApproval): Promise<Approval> {
      await sql.run(
        `INSERT INTO agent_approvals (id, kind, agent_id, user_id, binding_message, action, resource, context, action_key, rule, created_at, expires_at)
         VALUES (@id, 'action', @agent_id, @user_id, @binding_message, @action, @resource, @context, @action_key, @rule, @created_at, @expires_at)`,
        { ...r, created_at: now() },
      );
      return (await byId(sql, r.id))!;
    },
    get: (id: string): Promise<Approval | undefined> => byId(sql, id),
    async byAuthReqHash(hash: string): Promise<Approval | undefined> {
      const r = await sql.get<Row>(BY_AUTH_REQ, [hash]);
      return r && toApproval(r);
    },
    /**
     * One poll of a CIBA request, atomically across processes and instances: records the poll
     * time and says whether it came sooner than `interval` seconds after the request or the
     * previous poll.
     */
    poll(hash: string, nowMs: number, toleranceMs: number): Promise<PollOutcome> {
      return sql.transaction(async (tx): Promise<PollOutcome> => {
        await tx.lock(`ciba-poll:${hash}`);
        const r = await tx.get<Row>(BY_AUTH_REQ, [hash]);
        if (!r) return { kind: 'unknown' };
        const last = r.last_poll_ms ?? 0;
        const interval = (r.poll_interval ?? 5) * 1000;
        await tx.run('UPDATE agent_approvals SET last_poll_ms = ? WHERE id = ?', [nowMs, r.id]);
        const approval = toApproval({ ...r, last_poll_ms: nowMs });
        return nowMs - last + toleranceMs < interval ? { kind: 'too_soon', approval } : { kind: 'ok', approval };
      });
    },
    /** pending → approved or denied; `expiresAt` is the window that follows (false when not pending or expired). */
    async decide(id: string, state: 'approved' | 'denied', by: string, expiresAt: number): Promise<boolean> {
      const r = await sql.run(
        `UPDATE agent_approvals SET state = @state, decided_at = @t, decided_by = @by, expires_at = @expires_at
         WHERE id = @id AND state = 'pending' AND expires_at > @t`,
        { id, state, by, t: now(), expires_at: expiresAt },
      );
      return r.changes === 1;
    },
    /** approved → consumed, once: true for exactly one caller, on any instance (one conditional UPDATE). */
    consume: async (id: string): Promise<boolean> =>
      (await sql.run("UPDATE agent_approvals SET state = 'consumed', consumed_at = @t WHERE id = @id AND state = 'approved' AND expires_at > @t", { id, t: now() }))
        .changes === 1,
    /** The newest request for one action that still matters: pending, approved or denied and not past its window. */
    async latestForAction(actionKey: string): Promise<Approval | undefined> {
      const r = await sql.get<Row>(
        `SELECT * FROM agent_approvals WHERE action_key = ? AND kind = 'action' AND state IN ('pending', 'approved', 'denied') AND expires_at > ?
         ORDER BY created_at DESC, seq DESC LIMIT 1`,
        [actionKey, now()],
      );
      return r && toApproval(r);
    },
    /** Serializes the decisions about one action (its approval is looked up, then consumed or created). */
    lockAction: (actionKey: string): Promise<void> => sql.lock(`approval:${actionKey}`),
    async list(f: { state?: string; user_id?: string; limit?: number } = {}): Promise<Approval[]> {
      const rows = await sql.all<Row>(
        `SELECT * FROM agent_approvals
         WHERE (CAST(@user_id AS TEXT) IS NULL OR user_id = @user_id)
           AND (CAST(@state AS TEXT) IS NULL
                OR (@state = 'pending' AND state = 'pending' AND expires_at > @t)
                OR (@state = 'expired' AND state = 'pending' AND expires_at <= @t)
                OR (@state NOT IN ('pending', 'expired') AND state = @state))
         ORDER BY created_at DESC, seq DESC LIMIT @limit`,
        { user_id: f.user_id ?? null, state: f.state ?? null, t: now(), limit: Math.min(Math.max(f.limit ?? 100, 1), 1000) },
      );
      return rows.map(toApproval);
    },
  };
}
export type AgentAuthStore = ReturnType<typeof agentAuthStore>;
