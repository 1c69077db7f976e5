import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { SigningKeys } from './crypto/signing.js';
import type { SecretBox } from './crypto/secret-box.js';
import type { Logger } from './logger.js';
import type { PolicyService } from './policy-service.js';
import type { Metrics } from './metrics.js';
import type { SignalSink } from './signals.js';
import type { Store } from './store/index.js';
import type { EndpointUrls } from './urls.js';

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
