import type { Config } from './config.js';
import type { SigningKeys } from './crypto/signing.js';
import type { SecretBox } from './crypto/secret-box.js';
import type { Logger } from './logger.js';
import type { PolicyService } from './authz/policy-service.js';
import type { Metrics } from './authz/metrics.js';
import type { SignalSink } from './signals.js';
import type { Store } from './store/index.js';
import type { EndpointUrls } from './urls.js';

/** The one clock decisions, tokens and approvals read: milliseconds since the Unix epoch. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** Everything a request handler may use, passed in explicitly: no hidden globals. */
export interface AppContext {
  config: Config;
  logger: Logger;
  store: Store;
  keys: SigningKeys;
  box: SecretBox;
  urls: EndpointUrls;
  signals: SignalSink;
  policy: PolicyService;
  clock: Clock;
  metrics: Metrics;
  /** sha256 of the management API's bearer token */
  adminTokenHash: string;
}
