import type { RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { consentPage } from '../pages/consent.js';
import { sendPage } from '../pages/layout.js';
import { continueAuthorization, redirectError } from './authorization-endpoint.js';
import { csrfToken, verifyCsrf } from './csrf.js';
import { formBody } from './params.js';
import { loadPending } from './pending.js';
import { currentSession } from './session.js';
import { grantDelegation } from '../agents/delegation.js';
import { declaredTypes } from './authorization-details.js';
import { isDocumentClientId } from './client-metadata-document.js';

/** GET /consent?request=<pending id>: the scopes a third-party application asks for. */
export function consentForm(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    const pending = await loadPending(ctx, res, (req.query as Record<string, unknown>).request);
    if (!pending) return;
    const signedIn = await currentSession(ctx, req);
    if (!signedIn) return void res.redirect(302, `/login?request=${encodeURIComponent(pending.id)}`);
    const app = await ctx.store.applications.get(pending.client_id);
    const details = pending.params.authorization_details;
    const types = details?.length ? await declaredTypes(ctx) : undefined;
    sendPage(res, 200, consentPage({
      // A client known by its metadata document names itself: its host says who it really is.
      ...(isDocumentClientId(pending.client_id) && URL.canParse(pending.client_id) ? { clientHost: new URL(pending.client_id).host } : {}),
      ...(details?.length ? { authorizationDetails: details, typeDescriptions: new Map([...types!].map(([k, t]) => [k, t.description])) } : {}),
      csrf: csrfToken(ctx, req, res),
      requestId: pending.id,
      applicationName: app?.name ?? pending.client_id,
      userEmail: signedIn.user.email,
      scopes: pending.params.scope,
      ...(pending.params.delegate ? { delegate: { ...pending.params.delegate, name: (await ctx.store.agents.get(pending.params.delegate.agent_id))?.name ?? pending.params.delegate.agent_id } } : {}),
    }));
  };
}

/**
 * POST /consent: `decision=approve` remembers the scopes for (person, application), and the
 * agent the client asked to act for the person (`delegate_agent`); `deny` → access_denied.
 */
export function consentSubmit(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    const body = formBody(req);
    const pending = await loadPending(ctx, res, body.request);
    if (!pending) return;
    const signedIn = await currentSession(ctx, req);
    if (!signedIn) return void res.redirect(302, `/login?request=${encodeURIComponent(pending.id)}`);
    if (!verifyCsrf(ctx, req)) return void res.redirect(302, `/consent?request=${encodeURIComponent(pending.id)}`);
    if (body.decision === 'approve') {
      const asked = pending.params.delegate;
      if (asked) {
        // Added to what the person already allows that agent (never narrowed from here).
        const had = (await ctx.store.delegations.get(signedIn.user.id, asked.agent_id))?.capabilities ?? [];
        await grantDelegation(ctx, signedIn.user.id, asked.agent_id, [...new Set([...had, ...asked.capabilities])], 'user');
      }
      await ctx.store.oauth.addConsent(signedIn.user.id, pending.client_id, pending.params.scope);
      await ctx.store.oauth.markRequestConsented(pending.id);
      return await continueAuthorization(ctx, req, res, { ...pending, consented: true }, signedIn);
    }
    await ctx.store.oauth.deleteRequest(pending.id);
    redirectError(ctx, res, pending.params.redirect_uri, pending.params.state, errors.accessDenied('the person denied access'));
  };
}
