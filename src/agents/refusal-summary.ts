import type { AppContext } from '../context.js';
import { recordAuditOrLog } from '../authz/audit.js';

/** Refused sign-ins for agents that do not exist are summed up over this long, per process. */
export const SUMMARY_WINDOW_MS = 60_000;
/** The claimed agent IDs a summary names, at most (each cut to 64 characters). */
const SAMPLES = 5;

interface Window { count: number; claimed: Set<string>; purposes: Set<string>; timer: NodeJS.Timeout }

const windows = new WeakMap<AppContext, Window>();

/**
 * A sign-in refused for an agent that does not exist: anyone can send those, under any `iss`,
 * so each is counted rather than recorded. The first of a window starts it; when it closes, one
 * audit record (kind `token`, decision `refused`, reason `unknown_agent: <n> refused sign-ins`)
 * holds the count, the purposes and a few of the claimed IDs.
 */
export function countUnknownAgentRefusal(ctx: AppContext, claimed: string | null, purpose: string): void {
  let w = windows.get(ctx);
  if (!w) {
    const timer = setTimeout(() => void flushRefusalSummary(ctx), SUMMARY_WINDOW_MS);
    timer.unref();
    w = { count: 0, claimed: new Set(), purposes: new Set(), timer };
    windows.set(ctx, w);
  }
  w.count++;
  w.purposes.add(purpose);
  if (claimed !== null && w.claimed.size < SAMPLES) w.claimed.add(claimed.slice(0, 64));
}

/** Writes the open window's summary now (its timer, or a process that stops). */
export async function flushRefusalSummary(ctx: AppContext): Promise<void> {
  const w = windows.get(ctx);
  if (!w) return;
  windows.delete(ctx);
  clearTimeout(w.timer);
  await recordAuditOrLog(ctx, {
    kind: 'token',
    agent_id: null,
    action: [...w.purposes].sort().join(' '),
    decision: 'refused',
    reason: `unknown_agent: ${w.count} refused sign-in${w.count === 1 ? '' : 's'} for agents that do not exist`,
    context: { count: w.count, claimed: [...w.claimed] },
  });
}
