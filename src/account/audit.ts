import type { AppContext } from '../context.js';

/** What a person did to their own account, as the audit trail's `action` (kind `account`). */
export type AccountAction =
  | 'profile.update'
  | 'passkey.register'
  | 'passkey.rename'
  | 'passkey.remove'
  | 'passkey.suspended'
  | 'totp.enable'
  | 'totp.remove'
  | 'session.end'
  | 'consent.withdraw';

/**
 * Writes one record of a person's security change to the audit trail (kind `account`), inside
 * the caller's transaction so the record exists exactly when the change does. Names and ids
 * only: never a secret.
 */
export function recordAccountEvent(
  ctx: AppContext,
  userId: string,
  action: AccountAction,
  resource: string | null,
  context?: Record<string, unknown>,
  reason?: string,
): void {
  ctx.store.audit.append({ kind: 'account', user_id: userId, action, resource, context, reason: reason ?? null, decision: null });
}
