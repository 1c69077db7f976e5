import type { AppContext } from '../context.js';
import { EVENT_TYPES } from '../signals.js';
import type { Session } from '../store/sessions.js';
import type { User } from '../store/users.js';
import { recordAccountEvent } from './audit.js';
import { riscCredentialType } from './webauthn.js';

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

/** Ends sessions of the person (those still live); returns how many ended. Inside a transaction. */
function endSessionsNow(ctx: AppContext, user: User, sids: string[], reason: string): number {
  let ended = 0;
  for (const sid of sids) {
    const s = ctx.store.sessions.get(sid);
    if (!s || s.user_id !== user.id || !ctx.store.sessions.end(sid)) continue;
    ended++;
    ctx.store.oauth.revokeFamiliesOfSession(sid);
    ctx.signals.emit({
      type: EVENT_TYPES.sessionRevoked,
      subject: { user_id: user.id, email: user.email, session_id: sid },
      payload: { reason_user: reason },
      initiatingEntity: 'user',
    });
    recordAccountEvent(ctx, user.id, 'session.end', sid, undefined, reason);
  }
  return ended;
}

/** The person ends sessions from their account page: one, all others, or all. */
export async function endSessions(ctx: AppContext, user: User, sids: string[]): Promise<number> {
  return ctx.store.transaction(() => endSessionsNow(ctx, user, sids, 'ended by the person from their account page'));
}

/** The person's display name (`name` in tokens; not one of the claims token-claims-change reports). */
export async function changeName(ctx: AppContext, userId: string, name: string): Promise<boolean> {
  return ctx.store.transaction(() => {
    const cur = ctx.store.users.get(userId);
    if (!cur) return false;
    const { email, email_verified, picture, locale, groups, roles } = cur;
    ctx.store.users.update(userId, { email, name, email_verified, picture, locale, groups, roles });
    recordAccountEvent(ctx, userId, 'profile.update', null, { name });
    return true;
  });
}

export async function renamePasskey(ctx: AppContext, user: User, id: string, name: string): Promise<boolean> {
  return ctx.store.transaction(() => {
    const before = ctx.store.webauthn.get(id);
    if (!before || before.user_id !== user.id || !ctx.store.webauthn.rename(user.id, id, name)) return false;
    recordAccountEvent(ctx, user.id, 'passkey.rename', id, { from: before.name, to: name });
    return true;
  });
}

/**
 * Removes a passkey: it signs no one in any more, the other sessions it signed in end, and
 * when the person says it was lost or stolen receivers hear credential-compromise.
 */
export async function removePasskey(ctx: AppContext, user: User, id: string, lost: boolean, current: Session): Promise<boolean> {
  return ctx.store.transaction(() => {
    const credential = ctx.store.webauthn.get(id);
    if (!credential || credential.user_id !== user.id) return false;
    const signedIn = ctx.store.webauthn.liveSessionsOf(id).filter((sid) => sid !== current.sid);
    ctx.store.webauthn.remove(user.id, id);
    recordAccountEvent(ctx, user.id, 'passkey.remove', id, { name: credential.name, lost }, lost ? 'reported lost or stolen' : undefined);
    endSessionsNow(ctx, user, signedIn, 'the passkey this session signed in with was removed');
    if (lost) {
      ctx.signals.emit({
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
const otpSessions = (ctx: AppContext, user: User, current: Session) =>
  ctx.store.sessions.activeForUser(user.id).filter((s) => s.sid !== current.sid && s.amr.includes('otp')).map((s) => s.sid);

/**
 * Makes the secret being set up the person's TOTP secret (`sealed` is the one the confirmed
 * code came from). A secret it replaces counts as removed: sessions signed in with it end.
 */
export async function enableTotp(ctx: AppContext, user: User, sealed: string, current: Session): Promise<boolean> {
  return ctx.store.transaction(() => {
    const replaced = !!ctx.store.users.get(user.id)?.has_totp;
    const stale = replaced ? otpSessions(ctx, user, current) : [];
    if (!ctx.store.users.confirmPendingTotp(user.id, sealed)) return false;
    recordAccountEvent(ctx, user.id, 'totp.enable', null, { replaced });
    endSessionsNow(ctx, user, stale, 'the one-time code app this session signed in with was replaced');
    return true;
  });
}

/** Turns TOTP off: sessions signed in with a code end; a lost or stolen app emits credential-compromise. */
export async function removeTotp(ctx: AppContext, user: User, lost: boolean, current: Session): Promise<boolean> {
  return ctx.store.transaction(() => {
    const fresh = ctx.store.users.get(user.id);
    if (!fresh?.has_totp) return false;
    const stale = otpSessions(ctx, user, current);
    ctx.store.users.setTotpSecret(user.id, null);
    ctx.store.users.setPendingTotp(user.id, null, null);
    recordAccountEvent(ctx, user.id, 'totp.remove', null, { lost }, lost ? 'reported lost or stolen' : undefined);
    endSessionsNow(ctx, user, stale, 'the one-time code app this session signed in with was removed');
    if (lost) {
      ctx.signals.emit({
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
export async function withdrawConsent(ctx: AppContext, user: User, clientId: string): Promise<boolean> {
  return ctx.store.transaction(() => {
    if (!ctx.store.oauth.withdrawConsent(user.id, clientId)) return false;
    const revoked = ctx.store.oauth.revokeFamiliesOfUserClient(user.id, clientId);
    recordAccountEvent(ctx, user.id, 'consent.withdraw', clientId, { refresh_families_revoked: revoked });
    return true;
  });
}
