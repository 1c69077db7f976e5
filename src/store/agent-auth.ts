import type { Db } from './db.js';
import { bool, now, parseJson } from './util.js';

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
  created_at: number;
  expires_at: number;
  decided_at: number | null;
  decided_by: string | null;
  consumed_at: number | null;
}

interface Row extends Omit<Approval, 'scope' | 'openid' | 'context'> {
  scope: string | null;
  openid: number;
  context: string | null;
  auth_req_hash: string | null;
}

const toApproval = (r: Row): Approval => {
  const { auth_req_hash: _h, ...rest } = r;
  return {
    ...rest,
    scope: parseJson<string[]>(r.scope, []),
    openid: bool(r.openid),
    context: parseJson<Record<string, unknown> | null>(r.context, null),
  };
};

/** pending past its expiry reads as `expired` */
export const displayState = (a: Approval, t = now()): ApprovalState | 'expired' =>
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

/** Client assertion replay protection, CIBA requests and approvals. */
export function agentAuthStore(db: Db) {
  const insertJti = db.prepare('INSERT OR IGNORE INTO agent_assertion_jtis (agent_id, jti, expires_at) VALUES (?, ?, ?)');
  const purgeJtis = db.prepare('DELETE FROM agent_assertion_jtis WHERE expires_at < ?');
  // Answered or expired requests are kept a day for the administrators' list, then dropped.
  const purgeApprovals = db.prepare('DELETE FROM agent_approvals WHERE expires_at < ?');

  const insertCiba = db.prepare(
    `INSERT INTO agent_approvals (id, kind, agent_id, user_id, binding_message, auth_req_hash, auth_req_enc, scope, openid, poll_interval, last_poll_ms, created_at, expires_at)
     VALUES (@id, 'ciba', @agent_id, @user_id, @binding_message, @auth_req_hash, @auth_req_enc, @scope, @openid, @poll_interval, @last_poll_ms, @created_at, @expires_at)`,
  );
  const insertAction = db.prepare(
    `INSERT INTO agent_approvals (id, kind, agent_id, user_id, binding_message, action, resource, context, action_key, rule, created_at, expires_at)
     VALUES (@id, 'action', @agent_id, @user_id, @binding_message, @action, @resource, @context, @action_key, @rule, @created_at, @expires_at)`,
  );
  const byId = db.prepare<[string], Row>('SELECT * FROM agent_approvals WHERE id = ?');
  const byAuthReq = db.prepare<[string], Row>('SELECT * FROM agent_approvals WHERE auth_req_hash = ?');
  const setPoll = db.prepare('UPDATE agent_approvals SET last_poll_ms = ? WHERE id = ?');
  const decide = db.prepare(
    `UPDATE agent_approvals SET state = @state, decided_at = @t, decided_by = @by, expires_at = @expires_at
     WHERE id = @id AND state = 'pending' AND expires_at > @t`,
  );
  const consume = db.prepare(
    "UPDATE agent_approvals SET state = 'consumed', consumed_at = @t WHERE id = @id AND state = 'approved' AND expires_at > @t",
  );
  // The newest request for one action that still matters: pending, approved or denied and not past its window.
  const latestForAction = db.prepare<[string, number], Row>(
    `SELECT * FROM agent_approvals WHERE action_key = ? AND kind = 'action' AND state IN ('pending', 'approved', 'denied') AND expires_at > ?
     ORDER BY created_at DESC, rowid DESC LIMIT 1`,
  );
  const list = db.prepare<Record<string, unknown>, Row>(
    `SELECT * FROM agent_approvals
     WHERE (@user_id IS NULL OR user_id = @user_id)
       AND (@state IS NULL
            OR (@state = 'pending' AND state = 'pending' AND expires_at > @t)
            OR (@state = 'expired' AND state = 'pending' AND expires_at <= @t)
            OR (@state NOT IN ('pending', 'expired') AND state = @state))
     ORDER BY created_at DESC, rowid DESC LIMIT @limit`,
  );

  const pollTx = db.transaction((hash: string, nowMs: number, toleranceMs: number): PollOutcome => {
    const r = byAuthReq.get(hash);
    if (!r) return { kind: 'unknown' };
    const last = r.last_poll_ms ?? 0;
    const interval = (r.poll_interval ?? 5) * 1000;
    setPoll.run(nowMs, r.id);
    const approval = toApproval({ ...r, last_poll_ms: nowMs });
    return nowMs - last + toleranceMs < interval ? { kind: 'too_soon', approval } : { kind: 'ok', approval };
  });

  // One primary-key read: the hot path checks the `agents` counter on every call.
  const counter = db.prepare<[string], number>('SELECT version FROM change_counters WHERE domain = ?').pluck();

  let inserts = 0;

  return {
    /** The `agents` (or another domain's) change counter, as settings.version reads it but by key. */
    changeCounter: (domain: string): number => counter.get(domain) ?? 0,
    /** Records a client assertion's jti; false when it was seen before (a replay). */
    useJti(agentId: string, jti: string, expiresAt: number): boolean {
      // Purge now and then: rows are only needed until the assertion itself expires.
      if (++inserts % 500 === 0) {
        purgeJtis.run(now() - 60);
        purgeApprovals.run(now() - 24 * 60 * 60);
      }
      return insertJti.run(agentId, jti, expiresAt).changes === 1;
    },
    createCiba(r: NewCibaRequest): Approval {
      const t = now();
      insertCiba.run({
        ...r,
        scope: JSON.stringify(r.scope),
        openid: r.openid ? 1 : 0,
        last_poll_ms: Date.now(),
        created_at: t,
      });
      return toApproval(byId.get(r.id)!);
    },
    createAction(r: NewActionApproval): Approval {
      insertAction.run({ ...r, created_at: now() });
      return toApproval(byId.get(r.id)!);
    },
    get(id: string): Approval | undefined {
      const r = byId.get(id);
      return r && toApproval(r);
    },
    byAuthReqHash(hash: string): Approval | undefined {
      const r = byAuthReq.get(hash);
      return r && toApproval(r);
    },
    /**
     * One poll of a CIBA request, atomically across processes: records the poll time and says
     * whether it came sooner than `interval` seconds after the request or the previous poll.
     */
    poll: (hash: string, nowMs: number, toleranceMs: number): PollOutcome => pollTx.immediate(hash, nowMs, toleranceMs),
    /** pending → approved or denied; `expiresAt` is the window that follows (false when not pending or expired). */
    decide(id: string, state: 'approved' | 'denied', by: string, expiresAt: number): boolean {
      return decide.run({ id, state, by, t: now(), expires_at: expiresAt }).changes === 1;
    },
    /** approved → consumed, once: true for exactly one caller. */
    consume: (id: string): boolean => consume.run({ id, t: now() }).changes === 1,
    latestForAction(actionKey: string): Approval | undefined {
      const r = latestForAction.get(actionKey, now());
      return r && toApproval(r);
    },
    list(f: { state?: string; user_id?: string; limit?: number } = {}): Approval[] {
      return list
        .all({ user_id: f.user_id ?? null, state: f.state ?? null, t: now(), limit: Math.min(Math.max(f.limit ?? 100, 1), 1000) })
        .map(toApproval);
    },
  };
}
export type AgentAuthStore = ReturnType<typeof agentAuthStore>;
