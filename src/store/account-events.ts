import type { Store } from './index.js';

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
 * Writes one record of a person's security change to the audit trail (kind `account`; the
 * person is `user_id` and, when they made the change, `actor`), inside the caller's
 * transaction `tx` so the record exists exactly when the change does. Names and ids only:
 * never a secret.
 */
export async function recordAccountEvent(
  tx: Store,
  userId: string,
  action: AccountAction,
  resource: string | null,
  context?: Record<string, unknown>,
  reason?: string,
  byPerson = true,
): Promise<void> {
  await tx.audit.append({
    kind: 'account', user_id: userId, action, resource, context, reason: reason ?? null, decision: null, actor: byPerson ? userId : null,
  });
}
