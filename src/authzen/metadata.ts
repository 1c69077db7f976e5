import type { AppContext } from '../context.js';

/** The AuthZEN API's base: the audience of its callers' tokens and the client ID of the built-in `api` application. */
export const accessApiUrl = (ctx: AppContext): string => `${ctx.urls.issuer}/access/v1`;

export const AUTHZEN_PATHS = {
  evaluation: '/access/v1/evaluation',
  evaluations: '/access/v1/evaluations',
  searchSubject: '/access/v1/search/subject',
  searchResource: '/access/v1/search/resource',
  searchAction: '/access/v1/search/action',
} as const;

/**
 * The PDP metadata (`GET /.well-known/authzen-configuration`): the PDP identifier is the
 * issuer, and every endpoint this PDP serves is listed (absent ones would mean "not supported").
 */
export function pdpMetadata(ctx: AppContext) {
  const base = ctx.urls.issuer;
  return {
    policy_decision_point: base,
    access_evaluation_endpoint: base + AUTHZEN_PATHS.evaluation,
    access_evaluations_endpoint: base + AUTHZEN_PATHS.evaluations,
    search_subject_endpoint: base + AUTHZEN_PATHS.searchSubject,
    search_resource_endpoint: base + AUTHZEN_PATHS.searchResource,
    search_action_endpoint: base + AUTHZEN_PATHS.searchAction,
  };
}
