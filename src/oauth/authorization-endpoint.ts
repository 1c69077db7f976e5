import type { Request, RequestHandler, Response } from 'express';
import type { AppContext } from '../context.js';
import { randomToken, sha256 } from '../crypto/hash.js';
import { errors, ProtocolError } from '../errors.js';
import { ACR_VALUES, ACR_VALUES_SUPPORTED } from './acr.js';
import { sendPage } from '../pages/layout.js';
import { errorPage } from '../pages/error.js';
import type { Application } from '../store/applications.js';
import type { AuthorizationParams, PendingRequest } from '../store/oauth.js';
import { parseScope, single, type Params } from './params.js';
import { currentSession, type SignedIn } from './session.js';
import { CODE_TTL } from './tokens.js';
import { mayUseApplication } from './built-in-applications.js';
import { nowSeconds } from '../clock.js';
import { parseAuthorizationDetails } from './authorization-details.js';
import { resolveClient } from './client-metadata-document.js';
import { takePushedRequest } from './par.js';

/** How long a person has to finish signing in before the request must start again. */
export const PENDING_REQUEST_TTL = 30 * 60;

const CHALLENGE = /^[A-Za-z0-9\-._~]{43,128}$/;
/** A JWK SHA-256 thumbprint, base64url without padding (RFC 7638). */
const JKT = /^[A-Za-z0-9_-]{43}$/;
const PROMPTS = new Set(['none', 'login', 'consent', 'select_account']);

/** Amr and acr of the two strengths a password sign-in can reach. */
export const STRENGTH = {
  oneFactor: { acr: ACR_VALUES.oneFactor, amr: ['pwd'] },
  mfa: { acr: ACR_VALUES.mfa, amr: ['pwd', 'otp', 'mfa'] },
} as const;

export interface Strength {
  acr: string;
  amr: string[];
}

/** The amr method of a passkey: `swk` for a synced (backup eligible) one, `hwk` for one bound to its device. */
export type PasskeyMethod = 'hwk' | 'swk';
const PASSKEY_METHODS: readonly string[] = ['hwk', 'swk'];

/**
 * A passkey sign-in: with user verification (PIN, biometrics) it is two factors on its own,
 * `passkey_mfa` with `[method, "user", "mfa"]`; without, `passkey` with `[method]`. A password
 * before it on the same session is not counted: the passkey sets the session's strength afresh.
 */
export function passkeyStrength(method: PasskeyMethod, userVerified: boolean): Strength {
  return userVerified
    ? { acr: ACR_VALUES.passkeyMfa, amr: [method, 'user', 'mfa'] }
    : { acr: ACR_VALUES.passkey, amr: [method] };
}

/** The strength after the TOTP step: password + code is `mfa`, passkey + code is `passkey_mfa`. */
export function withOneTimeCode(before: { amr: string[] } | undefined): Strength {
  const method = before?.amr.find((m) => PASSKEY_METHODS.includes(m));
  return method ? { acr: ACR_VALUES.passkeyMfa, amr: [method, 'otp', 'mfa'] } : { acr: STRENGTH.mfa.acr, amr: [...STRENGTH.mfa.amr] };
}

/** Which requested values a session's acr meets: a stronger sign-in meets every weaker class it contains. */
const MEETS: Record<string, readonly string[]> = {
  [ACR_VALUES.oneFactor]: [ACR_VALUES.oneFactor],
  [ACR_VALUES.mfa]: [ACR_VALUES.oneFactor, ACR_VALUES.mfa],
  [ACR_VALUES.passkey]: [ACR_VALUES.oneFactor, ACR_VALUES.passkey],
  [ACR_VALUES.passkeyMfa]: ACR_VALUES_SUPPORTED,
};

/** Whether a sign-in of strength `acr` meets one of the `accepted` values. */
export const strengthMeets = (acr: string, accepted: readonly string[]): boolean => accepted.some((a) => MEETS[acr]?.includes(a));

/** The acr values a pending request accepts (undefined: any sign-in will do). */
export function acceptedAcr(p: AuthorizationParams): string[] | undefined {
  return p.acr_values ?? (p.acr_required ? [p.acr_required] : undefined);
}

/** The step that still stands between a person and the strength a request accepts. */
export type StrengthStep = 'done' | 'otp' | 'passkey' | 'unmet';

/**
 * What the person must do next for a request that accepts `accepted`, given what they have
 * done so far (`signedIn`: their session, or undefined right after a password that started no
 * session yet). Values are tried in the order asked; the first the person can reach wins.
 */
export async function nextStrengthStep(
  ctx: AppContext,
  user: { id: string; has_totp: boolean },
  accepted: string[] | undefined,
  signedIn: { acr: string; amr: string[] } | undefined,
): Promise<StrengthStep> {
  if (!accepted) return 'done';
  if (signedIn && accepted.some((a) => MEETS[signedIn.acr]?.includes(a))) return 'done';
  const afterPasskey = !!signedIn?.amr.some((m) => PASSKEY_METHODS.includes(m));
  const passkeys = await ctx.store.webauthn.usableCount(user.id);
  for (const value of accepted) {
    if (value === ACR_VALUES.oneFactor) return 'done';
    if (value === ACR_VALUES.mfa && user.has_totp) return 'otp';
    if (value === ACR_VALUES.passkey && passkeys > 0) return 'passkey';
    if (value === ACR_VALUES.passkeyMfa) {
      // A passkey without user verification needs the code next; without TOTP this value is out of reach.
      if (afterPasskey) {
        if (user.has_totp) return 'otp';
      } else if (passkeys > 0) {
        return 'passkey';
      }
    }
  }
  return 'unmet';
}

/** Why a request's strength is out of reach, for `error_description`. */
export function unmetDescription(accepted: string[]): string {
  const needs = accepted.map((a) => UNMET_TEXT[a] ?? a).join(', or ');
  return `the sign-in strength asked for cannot be reached: it needs ${needs}`;
}
const UNMET_TEXT: Record<string, string> = {
  [ACR_VALUES.mfa]: 'a one-time code (TOTP), which the person has not set up',
  [ACR_VALUES.passkey]: 'a passkey, which the person has not registered',
  [ACR_VALUES.passkeyMfa]: 'a user-verifying passkey or a passkey with a one-time code',
};


/** The authorize errors that are shown on the issuer instead of redirected (shown on the issuer so the browser is never sent to an unchecked URI). */
function showErrorPage(res: Response, err: ProtocolError): void {
  sendPage(res, err.status, errorPage(err.error, err.description ?? err.error));
}

/** Sends the browser back to the (registered) redirect URI with the response parameters. */
export function redirectToClient(ctx: AppContext, res: Response, redirectUri: string, params: Record<string, string | undefined>): void {
  const url = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.append(k, v);
  url.searchParams.append('iss', ctx.urls.issuer);
  res.setHeader('Cache-Control', 'no-store');
  res.redirect(302, url.toString());
}

/** The longest `state` accepted (and so echoed back in a redirect), here and at logout. */
export const MAX_STATE_LENGTH = 2048;

/** An authorize error at the redirect URI: `error`, `error_description`, `state` (and `iss`, RFC 9207). */
export function redirectError(ctx: AppContext, res: Response, redirectUri: string, state: string | undefined, err: ProtocolError): void {
  redirectToClient(ctx, res, redirectUri, { error: err.error, error_description: err.description, state });
}

const consentRequired = (d: string) => new ProtocolError(400, 'consent_required', d);
const unsupportedResponseType = (d: string) => new ProtocolError(400, 'unsupported_response_type', d);

/**
 * The strengths a request accepts, from `acr_values`: ours in the order asked, unknown values
 * ignored (they are voluntary, OIDC Core 3.1.2.1). Nothing of ours listed → unmet.
 */
function acceptedStrengths(acrValues: string | undefined): string[] | undefined {
  if (acrValues === undefined) return undefined;
  const values = [...new Set(acrValues.split(' ').filter((v) => (ACR_VALUES_SUPPORTED as readonly string[]).includes(v)))];
  if (values.length === 0) {
    throw errors.unmetAuthenticationRequirements(`none of the acr_values is offered here: ${ACR_VALUES_SUPPORTED.join(', ')}`);
  }
  return values;
}

/** A `resource` (RFC 8707) a person's token may be for: the MCP gateway or an API application. */
async function checkResource(ctx: AppContext, resource: string | undefined): Promise<string | undefined> {
  if (resource === undefined) return undefined;
  if (resource === ctx.urls.mcp) return resource;
  const api = await ctx.store.applications.get(resource);
  if (api && api.type === 'api') return resource;
  throw errors.invalidTarget('resource is not an API of this project');
}

/** Everything after client and redirect URI: errors from here on go to the redirect URI (at PAR: the JSON answer). */
export async function validateRequest(ctx: AppContext, app: Application, q: Params, redirectUri: string): Promise<AuthorizationParams> {
  const responseType = single(q, 'response_type');
  if (responseType !== undefined && responseType !== 'code') throw unsupportedResponseType('response_type must be code');
  if (app.type === 'm2m' || app.type === 'api') throw errors.unauthorizedClient('this application may not use the authorization code flow');
  if (single(q, 'request') !== undefined) throw errors.requestNotSupported('request objects are not supported');
  if (single(q, 'request_uri') !== undefined) throw errors.invalidRequest('request_uri cannot be part of a pushed request');

  const scope = parseScope(single(q, 'scope')) ?? ['openid'];
  if (scope.length === 0) scope.push('openid');

  const method = single(q, 'code_challenge_method');
  const challenge = single(q, 'code_challenge');
  if (method !== undefined && method !== 'S256') throw errors.invalidRequest('code_challenge_method must be S256');
  if (challenge === undefined) {
    if (method !== undefined) throw errors.invalidRequest('code_challenge_method without code_challenge');
    if (!app.has_secret) throw errors.invalidRequest('code_challenge is required (PKCE S256) for an application without a secret');
  } else if (!CHALLENGE.test(challenge)) {
    throw errors.invalidRequest('code_challenge is malformed');
  }

  const prompt = (single(q, 'prompt') ?? '').split(' ').filter(Boolean);
  for (const p of prompt) if (!PROMPTS.has(p)) throw errors.invalidRequest(`prompt ${p.slice(0, 30)} is not supported`);
  if (prompt.includes('none') && prompt.length > 1) throw errors.invalidRequest('prompt=none cannot be combined with other values');

  const maxAgeRaw = single(q, 'max_age');
  if (maxAgeRaw !== undefined && !/^\d{1,10}$/.test(maxAgeRaw)) throw errors.invalidRequest('max_age must be a non-negative integer');

  // RFC 9449 section 10: the code is bound to the DPoP key of this thumbprint (SHA-256, base64url)
  const dpopJkt = single(q, 'dpop_jkt');
  if (dpopJkt !== undefined && !JKT.test(dpopJkt)) throw errors.invalidRequest('dpop_jkt must be the base64url SHA-256 JWK thumbprint of a DPoP key (43 characters)');

  const state = single(q, 'state');
  const nonce = single(q, 'nonce');
  const loginHint = single(q, 'login_hint');
  if ((state?.length ?? 0) > MAX_STATE_LENGTH || (nonce?.length ?? 0) > 512 || (loginHint?.length ?? 0) > 320) {
    throw errors.invalidRequest('state, nonce or login_hint is too long');
  }

  const delegate = await delegationAsked(ctx, q);
  return {
    client_id: app.client_id,
    redirect_uri: redirectUri,
    scope,
    state,
    nonce,
    code_challenge: challenge,
    prompt,
    max_age: maxAgeRaw !== undefined ? Number(maxAgeRaw) : undefined,
    acr_values: acceptedStrengths(single(q, 'acr_values')),
    login_hint: loginHint,
    resource: await checkResource(ctx, single(q, 'resource')),
    authorization_details: await parseAuthorizationDetails(ctx, q.authorization_details),
    ...(delegate ? { delegate } : {}),
    ...(dpopJkt !== undefined ? { dpop_jkt: dpopJkt } : {}),
  };
}

/**
 * `delegate_agent=<agent id>` (optional `delegate_capabilities`, space-separated, default all
 * the agent holds): the client asks the person, on the consent page, to let that delegated
 * agent act for them (token exchange); the access token then names it in `may_act`.
 */
async function delegationAsked(ctx: AppContext, q: Params): Promise<AuthorizationParams['delegate'] | undefined> {
  const agentId = single(q, 'delegate_agent');
  const named = single(q, 'delegate_capabilities');
  if (agentId === undefined) {
    if (named !== undefined) throw errors.invalidRequest('delegate_capabilities without delegate_agent');
    return undefined;
  }
  const agent = agentId.length <= 512 ? await ctx.store.agents.get(agentId) : undefined;
  if (!agent || agent.revoked || agent.mode !== 'delegated') throw errors.invalidRequest('delegate_agent is not a delegated agent of this project');
  const held = agent.capabilities.map((c) => c.name);
  const capabilities = named === undefined ? held : [...new Set(named.split(' ').filter(Boolean))];
  const unknown = capabilities.filter((c) => !held.includes(c));
  if (unknown.length) throw errors.invalidRequest(`delegate_capabilities: not a capability of the agent: ${unknown.join(', ').slice(0, 200)}`);
  if (!capabilities.length) throw errors.invalidRequest('delegate_capabilities: the agent holds no capability to give');
  return { agent_id: agent.agent_id, capabilities };
}

/** GET (or POST) /oauth/authorize. */
export function authorizeEndpoint(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    const outer: Params = req.method === 'POST' ? ((req.body as Params) ?? {}) : (req.query as Params);

    // 1. The application: unknown → a 401 page, no redirect (a client_id URL: its metadata document)
    let clientId: string | undefined;
    let requestUri: string | undefined;
    try {
      clientId = single(outer, 'client_id');
      requestUri = single(outer, 'request_uri');
    } catch {
      return showErrorPage(res, errors.invalidRequest('client_id, redirect_uri and request_uri must be given once'));
    }
    if (clientId === undefined) return showErrorPage(res, errors.invalidRequest('client_id is required'));
    let app: Application | undefined;
    try {
      app = await resolveClient(ctx, clientId);
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err;
      return showErrorPage(res, err);
    }
    if (!app) return showErrorPage(res, errors.invalidClient('unknown client_id'));

    // 1½. A pushed request (RFC 9126): its parameters only, once; an application that requires one takes no other
    let q = outer;
    if (requestUri !== undefined) {
      try {
        q = await takePushedRequest(ctx, app.client_id, requestUri);
      } catch (err) {
        if (!(err instanceof ProtocolError)) throw err;
        return showErrorPage(res, err);
      }
    }

    // 2. The redirect URI: missing or not registered → a 400 page; never a redirect there
    let redirectUri: string | undefined;
    try {
      redirectUri = single(q, 'redirect_uri');
    } catch {
      return showErrorPage(res, errors.invalidRequest('client_id, redirect_uri and request_uri must be given once'));
    }
    if (redirectUri === undefined) return showErrorPage(res, errors.invalidRequest('redirect_uri is required'));
    if (!app.redirect_uris.includes(redirectUri)) return showErrorPage(res, errors.invalidRequest('redirect_uri is not registered for this application'));

    // 3. The rest of the request: errors go back to the redirect URI with state
    let params: AuthorizationParams;
    try {
      if (requestUri === undefined && app.require_pushed_authorization_requests) {
        throw errors.invalidRequest('this application sends its authorization requests through the pushed authorization request endpoint (request_uri)');
      }
      params = await validateRequest(ctx, app, q, redirectUri);
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err;
      // A state too long to accept is too long to echo: the redirect would outgrow what clients read.
      const state = typeof q.state === 'string' && q.state.length <= MAX_STATE_LENGTH ? q.state : undefined;
      return redirectError(ctx, res, redirectUri, state, err);
    }

    // 4. Keep the request while the person signs in, then move it on
    // Housekeeping now and then, in whichever worker: expired requests, codes and counters.
    if (Math.random() < 0.01) {
      await ctx.store.oauth.purgeExpired();
      await ctx.store.rateLimits.purgeOlderThan(nowSeconds(ctx.clock) - 24 * 60 * 60);
      await ctx.store.webauthn.purgeExpiredChallenges();
    }
    const id = randomToken();
    await ctx.store.oauth.createRequest(id, params, PENDING_REQUEST_TTL);
    await continueAuthorization(ctx, req, res, (await ctx.store.oauth.getRequest(id))!);
  };
}

/**
 * Moves a pending request to its next step: sign-in, strength (second step or passkey),
 * assignment, consent, and finally the code. Called by authorize and after each page the
 * person submits.
 */
export async function continueAuthorization(
  ctx: AppContext,
  req: Request,
  res: Response,
  pending: PendingRequest,
  signedInGiven?: SignedIn,
): Promise<void> {
  const signedIn = signedInGiven ?? (await currentSession(ctx, req));
  const p = pending.params;
  let app: Application | undefined;
  try {
    app = await resolveClient(ctx, pending.client_id);
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
  }
  if (!app || !app.redirect_uris.includes(p.redirect_uri)) {
    await ctx.store.oauth.deleteRequest(pending.id);
    return showErrorPage(res, errors.invalidRequest('the application or its redirect URI changed; start again'));
  }
  const silent = p.prompt.includes('none');
  const fail = async (err: ProtocolError) => {
    await ctx.store.oauth.deleteRequest(pending.id);
    redirectError(ctx, res, p.redirect_uri, p.state, err);
  };
  const goTo = (path: string) => res.redirect(302, `${path}?request=${encodeURIComponent(pending.id)}`);

  // 1. Signed in, recently enough (prompt=login and max_age are met by a sign-in during this request)
  // max_age=0 means "sign in now", so it always asks, like prompt=login.
  const tooOld = !pending.fresh && signedIn && p.max_age !== undefined &&
    (p.max_age === 0 || nowSeconds(ctx.clock) - signedIn.session.auth_time > p.max_age);
  const forced = !pending.fresh && p.prompt.includes('login');
  if (!signedIn || tooOld || forced) {
    if (silent) return fail(errors.loginRequired(signedIn ? 'the session is too old for max_age' : 'the person is not signed in'));
    return goTo('/login');
  }
  const { session, user } = signedIn;

  // 2. Assigned to the application
  if (!(await mayUseApplication(ctx, app.client_id, user))) {
    return fail(errors.accessDenied('the person is not assigned to this application'));
  }

  // 3. Strength: the acr_values asked for (a one-time code or a passkey still to come)
  const accepted = acceptedAcr(p);
  const step = await nextStrengthStep(ctx, user, accepted, session);
  if (step === 'unmet') return fail(errors.unmetAuthenticationRequirements(unmetDescription(accepted ?? [])));
  if (step !== 'done') {
    if (silent) return fail(errors.interactionRequired(step === 'otp' ? 'a one-time code is required' : 'a passkey sign-in is required'));
    return goTo(step === 'otp' ? '/login/otp' : '/login/passkey');
  }

  // 4. Consent for a third-party application, for any request with authorization details
  // (each is a one-time approval of exactly what it says: nothing remembered covers it), and
  // always for an agent to act for the person
  if (p.delegate && !pending.consented) {
    if (silent) return fail(consentRequired('the person has not let this agent act for them'));
    return goTo('/consent');
  }
  const detailed = !!p.authorization_details?.length;
  if ((!app.first_party || detailed) && !pending.consented) {
    const had = await ctx.store.oauth.consentedScopes(user.id, app.client_id);
    const covered = !detailed && p.scope.every((s) => had.includes(s));
    if (!covered || p.prompt.includes('consent')) {
      if (silent) return fail(consentRequired('the person has not allowed this application these scopes'));
      return goTo('/consent');
    }
  }

  // 5. The code
  const code = randomToken();
  await ctx.store.oauth.createCode(
    sha256(code),
    {
      client_id: app.client_id,
      user_id: user.id,
      sid: session.sid,
      redirect_uri: p.redirect_uri,
      scope: p.scope,
      resource: p.resource ?? null,
      nonce: p.nonce ?? null,
      code_challenge: p.code_challenge ?? null,
      dpop_jkt: p.dpop_jkt ?? null,
      auth_time: session.auth_time,
      amr: session.amr,
      acr: session.acr,
      authorization_details: p.authorization_details ?? null,
    },
    CODE_TTL,
  );
  await ctx.store.oauth.deleteRequest(pending.id);
  redirectToClient(ctx, res, p.redirect_uri, { code, state: p.state });
}
