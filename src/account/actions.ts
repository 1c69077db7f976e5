import type { AppContext } from '../context.js';
import { EVENT_TYPES } from '../signals.js';
import type { Store } from '../store/index.js';
import type { Session } from '../store/sessions.js';
import type { User } from '../store/users.js';
import { recordAccountEvent } from '../store/account-events.js';
import { riscCredentialType } from '../oauth/passkeys.js';

/**
 * The changes a person makes on their account page. Each runs in one store transaction with
 * its audit record and its Shared Signals events, so all of them exist exactly when the change
 * does. The rule for events:
 *
 * - a session that ends emits session-revoked (one per session), and its refresh tokens stop;
 * - a removed (or replaced) credential ends the person's other sessions that were signed in with
 *   it: a removed passkey the sessions it signed in, a removed TOTP the sessions whose `amr`
 *   has `otp`;
 * - a credential the person reports lost or stolen emits credential-compromise;
 * - a new credential, a renamed passkey and a withdrawn consent emit nothing (none of the four
 *   event types describes them); the audit trail records them.
 */

/** Ends sessions of the person (those still live) in `tx`; returns how many ended. */
async function endSessionsIn(tx: Store, ctx: AppContext, user: User, sids: string[], reason: string): Promise<number> {
  let ended = 0;
  for (const sid of sids) {
    const s = await tx.sessions.get(sid);
    if (!s || s.user_id !== user.id || !(await tx.sessions.end(sid))) continue;
    ended++;
    await tx.oauth.revokeFamiliesOfSession(sid);
    await ctx.signals.emit(tx, {
      type: EVENT_TYPES.sessionRevoked,
      subject: { user_id: user.id, email: user.email, session_id: sid },
      payload: { reason_user: reason },
      initiatingEntity: 'user',
    });
    await recordAccountEvent(tx, user.id, 'session.end', sid, undefined, reason);
  }
  return ended;
}

/** The person ends sessions from their account page: one, all others, or all. */
export function endSessions(ctx: AppContext, user: User, sids: string[]): Promise<number> {
  return ctx.store.transaction((tx) => endSessionsIn(tx, ctx, user, sids, 'ended by the person from their account page'));
}

/** The person's display name (`name` in tokens; not one of the claims token-claims-change reports). */
export function changeName(ctx: AppContext, userId: string, name: string): Promise<boolean> {
  return ctx.store.transaction(async (tx) => {
    const cur = await tx.users.get(userId);
    if (!cur) return false;
    const { email, email_verified, picture, locale, groups, roles } = cur;
    await tx.users.update(userId, { email, name, email_verified, picture, locale, groups, roles });
    await recordAccountEvent(tx, userId, 'profile.update', null, { name });
    return true;
  });
}

export function renamePasskey(ctx: AppContext, user: User, id: string, name: string): Promise<boolean> {
  return ctx.store.transaction(async (tx) => {
    const before = await tx.webauthn.get(id);
    if (!before || before.user_id !== user.id || !(await tx.webauthn.rename(user.id, id, name))) return false;
    await recordAccountEvent(tx, user.id, 'passkey.rename', id, { from: before.name, to: name });
    return true;
  });
}

/**
 * Removes a passkey: it signs no one in any more, the other sessions it signed in end, and
 * when the person says it was lost or stolen receivers hear credential-compromise.
 */
export function removePasskey(ctx: AppContext, user: User, id: string, lost: boolean, current: Session): Promise<boolean> {
  return ctx.store.transaction(async (tx) => {
    const credential = await tx.webauthn.get(id);
    if (!credential || credential.user_id !== user.id) return false;
    const signedIn = (await tx.webauthn.liveSessionsOf(id)).filter((sid) => sid !== current.sid);
    await tx.webauthn.remove(user.id, id);
    await recordAccountEvent(tx, user.id, 'passkey.remove', id, { name: credential.name, lost }, lost ? 'reported lost or stolen' : undefined);
    await endSessionsIn(tx, ctx, user, signedIn, 'the passkey this session signed in with was removed');
    if (lost) {
      await ctx.signals.emit(tx, {
        type: EVENT_TYPES.credentialCompromise,
        subject: { user_id: user.id, email: user.email },
        payload: { credential_type: riscCredentialType(credential), reason_user: 'the person reported the passkey lost or stolen' },
        initiatingEntity: 'user',
      });
    }
    return true;
  });
}

/** Sessions (other than `current`) that a one-time code signed in. */
const otpSessions = async (tx: Store, user: User, current: Session) =>
  (await tx.sessions.activeForUser(user.id)).filter((s) => s.sid !== current.sid && s.amr.includes('otp')).map((s) => s.sid);

/**
 * Makes the secret being set up the person's TOTP secret (`sealed` is the one the confirmed
 * code came from). A secret it replaces counts as removed: sessions signed in with it end.
 */
export function enableTotp(ctx: AppContext, user: User, sealed: string, current: Session): Promise<boolean> {
  return ctx.store.transaction(async (tx) => {
    const replaced = !!(await tx.users.get(user.id))?.has_totp;
    const stale = replaced ? await otpSessions(tx, user, current) : [];
    if (!(await tx.users.confirmPendingTotp(user.id, sealed))) return false;
    await recordAccountEvent(tx, user.id, 'totp.enable', null, { replaced });
    await endSessionsIn(tx, ctx, user, stale, 'the one-time code app this session signed in with was replaced');
    return true;
  });
}

/** Turns TOTP off: sessions signed in with a code end; a lost or stolen app emits credential-compromise. */
export function removeTotp(ctx: AppContext, user: User, lost: boolean, current: Session): Promise<boolean> {
  return ctx.store.transaction(async (tx) => {
    if (!(await tx.users.get(user.id))?.has_totp) return false;
    const stale = await otpSessions(tx, user, current);
    await tx.users.setTotpSecret(user.id, null);
    await tx.users.setPendingTotp(user.id, null, null);
    await recordAccountEvent(tx, user.id, 'totp.remove', null, { lost }, lost ? 'reported lost or stolen' : undefined);
    await endSessionsIn(tx, ctx, user, stale, 'the one-time code app this session signed in with was removed');
    if (lost) {
      await ctx.signals.emit(tx, {
        type: EVENT_TYPES.credentialCompromise,
        subject: { user_id: user.id, email: user.email },
        payload: { credential_type: 'app', reason_user: 'the person reported their one-time code app lost or stolen' },
        initiatingEntity: 'user',
      });
    }
    return true;
  });
}

/** Withdraws what the person allowed an application; its refresh tokens for them stop working. */
export function withdrawConsent(ctx: AppContext, user: User, clientId: string): Promise<boolean> {
  return ctx.store.transaction(async (tx) => {
    if (!(await tx.oauth.withdrawConsent(user.id, clientId))) return false;
    const revoked = await tx.oauth.revokeFamiliesOfUserClient(user.id, clientId);
    await recordAccountEvent(tx, user.id, 'consent.withdraw', clientId, { refresh_families_revoked: revoked });
    return true;
  });
}
