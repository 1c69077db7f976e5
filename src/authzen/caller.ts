import type { AppContext } from '../context.js';
import { errors, type ProtocolError } from '../errors.js';
import { verifiedTokens } from '../authz/verified-tokens.js';
import { ACCESS_TOKEN_TYP } from '../oauth/tokens.js';
import { accessCredential, type AccessCredential } from '../oauth/bearer.js';
import { checkSenderConstraint, refusedTokenChallenge } from '../oauth/dpop.js';
import { accessApiUrl } from './metadata.js';
import { nowSeconds } from '../clock.js';
import type { AuthzenGrantTerms } from '../store/applications.js';

/** Who asks: the m2m application whose access token came with the request, and its grant's terms. */
export interface Caller {
  clientId: string;
  terms: AuthzenGrantTerms;
}

/**
 * Whether the caller is the named agent's enforcement point: only then do its evaluations about
 * that agent act (consume limits and one-time approvals, create approvals).
 */
export const enforcesFor = (caller: Caller, agentId: string): boolean => {
  const named = caller.terms.enforcement_point_for;
  return named === '*' || (named !== undefined && named.includes(agentId));
};


function unauthorized(ctx: AppContext, description: string, withError: boolean, scheme?: AccessCredential['scheme']): ProtocolError {
  const realm = `realm="${accessApiUrl(ctx)}"`;
  const bearer = withError ? `Bearer ${realm}, error="invalid_token", error_description="${description}"` : `Bearer ${realm}`;
  return errors.invalidToken(description, {}, refusedTokenChallenge(scheme, description, bearer, realm));
}

/**
 * The caller of an AuthZEN endpoint: `Authorization: Bearer <access token>` whose `aud` is
 * `{issuer}/access/v1`, signed by us (RS256, `typ: at+jwt`, unexpired), for an m2m application
 * that still holds a grant on the built-in `api` application. A missing, foreign, expired or
 * misdirected token, or one whose application is gone, is a 401; an authentic token of an
 * application without a grant (or not m2m) is a 403 `insufficient_scope`. Both carry a
 * `WWW-Authenticate` challenge. A verified token is remembered until it expires (one map
 * lookup per repeat); the grant (and its terms) is checked on every request against a
 * per-process view that follows the `applications` change counter. A DPoP-bound token comes as `Authorization: DPoP`
 * with a proof for `request` (its `DPoP` header, the endpoint's URL), checked on every request.
 */
export async function authenticateCaller(
  ctx: AppContext,
  authorization: string | undefined,
  request?: { get(name: string): string | undefined; htu: string },
): Promise<Caller> {
  if (!authorization) throw unauthorized(ctx, 'an access token is required (Authorization: Bearer)', false);
  const credential = accessCredential(authorization);
  const token = credential?.token;
  if (credential === undefined || token === undefined || token.length > 8192) throw unauthorized(ctx, 'the Authorization header is not a bearer token', true, credential?.scheme);
  const audience = accessApiUrl(ctx);
  const cache = verifiedTokens(ctx, `authzen:${audience}`);
  let payload = cache.get(token, nowSeconds(ctx.clock))?.payload;
  if (!payload) {
    try {
      const verified = await ctx.keys.verify(token, 'RS256', {
        issuer: ctx.urls.issuer,
        audience,
        typ: ACCESS_TOKEN_TYP,
        requiredClaims: ['exp', 'iat', 'sub'],
      });
      payload = verified.payload;
      cache.set(token, payload);
    } catch {
      throw unauthorized(ctx, `the access token is invalid, expired or not for ${audience}`, true, credential.scheme);
    }
  }
  // A DPoP-bound token needs its proof; a request with nothing to check a proof against has none.
  await checkSenderConstraint(ctx, request ?? { get: () => undefined }, credential, payload, { htm: 'POST', htu: request?.htu ?? '' });
  const clientId = payload.client_id;
  const { standing, terms } = typeof clientId === 'string' ? await grants(ctx).standing(clientId) : UNKNOWN;
  // A token whose application is gone is as good as revoked: the caller is not authenticated.
  if (standing === 'unknown') throw unauthorized(ctx, 'the application of this token no longer exists', true, credential.scheme);
  // An authentic token of an application that may not ask (no grant, or not an m2m
  // application): the caller is known, the request forbidden.
  if (standing === 'forbidden') throw forbidden(ctx, 'the application of this token holds no grant on the AuthZEN API');
  return { clientId: clientId as string, terms };
}

function forbidden(ctx: AppContext, description: string): ProtocolError {
  return errors.insufficientScope(description, {}, {
    'WWW-Authenticate': `Bearer realm="${accessApiUrl(ctx)}", error="insufficient_scope", error_description="${description}"`,
  });
}

/** Whether an application may call the AuthZEN API: an m2m application holding a grant on it. */
type Standing = { standing: 'granted' | 'forbidden' | 'unknown'; terms: AuthzenGrantTerms };
const UNKNOWN: Standing = { standing: 'unknown', terms: {} };

/** Which applications may call the AuthZEN API, per process, per change. */
class GrantView {
  private version = -1;
  private known = new Map<string, Standing>();
  private checkedThisTurn = false;

  constructor(private readonly ctx: AppContext) {}

  async standing(clientId: string): Promise<Standing> {
    if (!this.checkedThisTurn) {
      this.checkedThisTurn = true;
      setImmediate(() => (this.checkedThisTurn = false));
      const v = await this.ctx.store.settings.version('applications');
      if (v !== this.version) {
        this.known.clear();
        this.version = v;
      }
    }
    let s = this.known.get(clientId);
    if (s === undefined) {
      const app = await this.ctx.store.applications.get(clientId);
      const grant = app?.type === 'm2m' ? await this.ctx.store.applications.getGrant(clientId, accessApiUrl(this.ctx)) : undefined;
      s = !app ? UNKNOWN : grant ? { standing: 'granted', terms: grant.authzen ?? {} } : { standing: 'forbidden', terms: {} };
      if (this.known.size > 10_000) this.known.clear();
      this.known.set(clientId, s);
    }
    return s;
  }
}

const views = new WeakMap<AppContext, GrantView>();
function grants(ctx: AppContext): GrantView {
  let v = views.get(ctx);
  if (!v) views.set(ctx, (v = new GrantView(ctx)));
  return v;
}
