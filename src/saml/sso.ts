import type { Request, RequestHandler, Response } from 'express';
import type { AppContext } from '../context.js';
import { randomToken, sha256 } from '../crypto/hash.js';
import { errorPage } from '../pages/error.js';
import { sendPage } from '../pages/layout.js';
import { currentSession, loginUrl, type SignedIn } from '../oauth/session.js';
import type { SamlConnection } from '../store/saml.js';
import { AuthnRequestError, readAuthnRequest, type AuthnRequest } from './authn-request.js';
import { readBindingMessage, sendPostForm } from './binding.js';
import { signInResponse, statusResponse } from './response.js';
import { samlUrls } from './urls.js';
import { BINDINGS, NAME_ID_FORMATS, STATUS, SUPPORTED_NAME_ID_FORMATS } from './xml.js';
import { nowSeconds } from '../clock.js';

/** How long an AuthnRequest waits for the person to sign in. */
export const PENDING_SSO_TTL_SECONDS = 30 * 60;
const MAX_RELAY_STATE = 1024;
const NO_PASSIVE = 'urn:oasis:names:tc:SAML:2.0:status:NoPassive';


/** An error shown on our own page: the request cannot be trusted enough to answer the SP. */
function showError(res: Response, description: string, status = 400): void {
  sendPage(res, status, errorPage('invalid_request', description));
}

/** What an SP asked for, once checked against its registration. */
interface Accepted {
  sp: SamlConnection;
  requestId: string;
  nameIdFormat: string;
  relayState?: string;
  forceAuthn: boolean;
}

/** The SP by its entityID, and its ACS: a request naming an ACS other than the registered one is refused. */
async function registeredServiceProvider(ctx: AppContext, r: AuthnRequest): Promise<SamlConnection | string> {
  const sp = await ctx.store.saml.spByEntityId(r.issuer);
  if (!sp || !sp.acs_url) return `The service provider ${r.issuer} is not registered.`;
  if (r.acsUrl !== undefined && r.acsUrl !== sp.acs_url) return 'The AssertionConsumerServiceURL is not the one registered for this service provider.';
  if (r.acsUrl === undefined && r.acsIndex !== undefined && r.acsIndex !== '0') return 'Only AssertionConsumerServiceIndex 0 (the registered ACS URL) is known.';
  if (r.protocolBinding !== undefined && r.protocolBinding !== BINDINGS.post) return 'Only the HTTP-POST binding is supported for the response.';
  return sp;
}

/** Posts a Response with a non-success status to the SP's ACS. */
async function answerWithStatus(ctx: AppContext, res: Response, a: Pick<Accepted, 'sp' | 'requestId' | 'relayState'>, subStatus: string, message: string, status: string = STATUS.requester): Promise<void> {
  const xml = await statusResponse(ctx, { acsUrl: a.sp.acs_url!, inResponseTo: a.requestId, status, subStatus, message });
  sendPostForm(res, a.sp.acs_url!, { SAMLResponse: Buffer.from(xml).toString('base64'), RelayState: a.relayState });
}

/** Posts the signed Response with the person's assertion to the SP's ACS. */
async function answerSignedIn(ctx: AppContext, res: Response, a: Accepted, who: SignedIn): Promise<void> {
  const xml = await signInResponse(ctx, {
    acsUrl: a.sp.acs_url!,
    inResponseTo: a.requestId,
    audience: a.sp.entity_id,
    nameIdFormat: a.nameIdFormat,
    user: who.user,
    session: who.session,
  });
  ctx.logger.info({ connection: a.sp.name, sub: who.user.id }, 'saml sign-in');
  sendPostForm(res, a.sp.acs_url!, { SAMLResponse: Buffer.from(xml).toString('base64'), RelayState: a.relayState });
}

/** Keeps the request in SQLite (any worker may see the person come back) and sends the browser to sign in. */
async function holdForSignIn(ctx: AppContext, res: Response, a: Accepted): Promise<void> {
  const id = randomToken();
  const t = nowSeconds(ctx.clock);
  await ctx.store.saml.addPending({
    id_hash: sha256(id),
    connection: a.sp.name,
    request_id: a.requestId,
    relay_state: a.relayState ?? null,
    name_id_format: a.nameIdFormat,
    force_authn: a.forceAuthn ? 1 : 0,
    created_at: t,
    expires_at: t + PENDING_SSO_TTL_SECONDS,
  });
  res.setHeader('Cache-Control', 'no-store');
  res.redirect(302, loginUrl(`/saml/sso/resume?request=${encodeURIComponent(id)}`));
}

/** GET (HTTP-Redirect) or POST (HTTP-POST) /saml/sso: SP-initiated single sign-on. */
export function ssoEndpoint(ctx: AppContext): RequestHandler {
  return async (req: Request, res: Response) => {
    // 1. The AuthnRequest, decoded and read
    const message = readBindingMessage(req, 'SAMLRequest');
    if (!message) return showError(res, 'SAMLRequest is missing.');
    let request: AuthnRequest;
    try {
      request = readAuthnRequest(message);
    } catch (err) {
      if (err instanceof AuthnRequestError) return showError(res, err.message);
      throw err;
    }
    if (message.relayState && message.relayState.length > MAX_RELAY_STATE) return showError(res, `RelayState is longer than ${MAX_RELAY_STATE} characters.`);

    // 2. The registered SP and its ACS: until both are known, nothing is sent anywhere
    const sp = await registeredServiceProvider(ctx, request);
    if (typeof sp === 'string') return showError(res, sp);
    const base = { sp, requestId: request.id, relayState: message.relayState };

    // 3. What the SP asks for, answered at its ACS when we cannot give it
    if (request.destination !== undefined && request.destination !== samlUrls(ctx).sso) {
      return answerWithStatus(ctx, res, base, STATUS.requestDenied, 'Destination is not this SSO endpoint');
    }
    const format = request.nameIdFormat && request.nameIdFormat !== NAME_ID_FORMATS.unspecified ? request.nameIdFormat : (sp.name_id_format ?? NAME_ID_FORMATS.emailAddress);
    if (!SUPPORTED_NAME_ID_FORMATS.includes(format)) {
      return answerWithStatus(ctx, res, base, STATUS.invalidNameIdPolicy, `NameID format ${format} is not supported`);
    }
    const accepted: Accepted = { ...base, nameIdFormat: format, forceAuthn: request.forceAuthn };

    // 4. The person: signed in already, or sent to sign in and back to /saml/sso/resume
    const who = await currentSession(ctx, req);
    if (who && !request.forceAuthn) return answerSignedIn(ctx, res, accepted, who);
    if (request.isPassive) return answerWithStatus(ctx, res, base, NO_PASSIVE, 'The person is not signed in');
    await holdForSignIn(ctx, res, accepted);
  };
}

/** GET /saml/sso/resume?request=<id>: after signing in, the held AuthnRequest is answered once. */
export function ssoResumeEndpoint(ctx: AppContext): RequestHandler {
  return async (req: Request, res: Response) => {
    // 1. The held request
    const id = (req.query as Record<string, unknown>).request;
    const idHash = typeof id === 'string' && id.length <= 200 ? sha256(id) : undefined;
    const pending = idHash ? await ctx.store.saml.pending(idHash) : undefined;
    const sp = pending ? await ctx.store.saml.get(pending.connection) : undefined;
    if (!pending || !sp || sp.kind !== 'sp' || !sp.acs_url) {
      return showError(res, 'This sign-in request has expired or is not known. Go back to the application and start again.');
    }

    // 2. The person, signed in after the request when it asked for ForceAuthn
    const who = await currentSession(ctx, req);
    if (!who || (pending.force_authn && who.session.auth_time < pending.created_at)) {
      res.setHeader('Cache-Control', 'no-store');
      return res.redirect(302, loginUrl(`/saml/sso/resume?request=${encodeURIComponent(String(id))}`));
    }

    // 3. Single use across every worker, then the answer
    if (!(await ctx.store.saml.consumePending(idHash!))) return showError(res, 'This sign-in request was already answered.');
    return answerSignedIn(ctx, res, {
      sp,
      requestId: pending.request_id,
      relayState: pending.relay_state ?? undefined,
      nameIdFormat: pending.name_id_format,
      forceAuthn: pending.force_authn === 1,
    }, who);
  };
}
