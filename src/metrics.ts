import cluster from 'node:cluster';
import { randomUUID } from 'node:crypto';
import { AggregatorRegistry, type PrometheusContentType, collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The service's Prometheus metrics, one registry per process. In a cluster the primary adds
 * up every worker's registry and its own (see clusterMetrics), so any worker answers /metrics
 * for the whole deployment. Labels carry codes, routes and outcomes only: never an ID.
 */
export interface Metrics {
  registry: Registry;
  /** decisions by door, outcome and the cause's code */
  decisions: Counter<'via' | 'outcome' | 'reason'>;
  decisionSeconds: Histogram<'via'>;
  /** tokens issued, by grant */
  tokens: Counter<'grant'>;
  /** every HTTP answer's latency, by route pattern, method and status */
  httpSeconds: Histogram<'route' | 'method' | 'status'>;
  /** requests refused with 429 by a rate limiter, by route */
  rateLimited: Counter<'route'>;
  /** Shared Signals pushes by outcome (delivered, retry, failed) */
  ssfPushes: Counter<'outcome'>;
  /** lookups of our own tokens among those already verified here, by kind and hit or miss (a miss costs a signature verify), and tokens another worker told of (shared) */
  verifiedTokenCache: Counter<'kind' | 'result'>;
  /** installs the scrape-time gauges, each reading its source when scraped (backlogs, policy) */
  attach(sources: GaugeSources): void;
  /** the exposition text /metrics answers with (in a cluster worker: the whole deployment's) */
  text(): Promise<string>;
}

/** What the scrape-time gauges read: given by whoever assembles the service, so the registry knows no service. */
export interface GaugeSources {
  /** audit records waiting for their commit in this process */
  auditBacklog(): number;
  /** Shared Signals events waiting for delivery (from the database) */
  ssfBacklog(): Promise<number>;
  /** the policy in force: its status and, once one compiled, its version */
  policyState(): Promise<{ status: string; set?: { version: string } | null }>;
}

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

export function createMetrics(opts: { defaults?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (opts.defaults !== false) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const metrics: Metrics = {
    registry,
    decisions: new Counter({
      name: 'gatehouse_decisions_total',
      help: 'Decisions by door (decision endpoint, MCP gateway, transaction-token binding), outcome and reason code',
      labelNames: ['via', 'outcome', 'reason'],
      registers,
    }),
    decisionSeconds: new Histogram({
      name: 'gatehouse_decision_duration_seconds',
      help: 'Time to decide (facts, policy, approvals, audit record), by door',
      labelNames: ['via'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    tokens: new Counter({ name: 'gatehouse_tokens_issued_total', help: 'Tokens issued, by grant', labelNames: ['grant'], registers }),
    httpSeconds: new Histogram({
      name: 'gatehouse_http_request_duration_seconds',
      help: 'HTTP answers by route pattern, method and status',
      labelNames: ['route', 'method', 'status'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    rateLimited: new Counter({
      name: 'gatehouse_rate_limited_total',
      help: 'Requests refused by a rate limiter (HTTP 429), by route',
      labelNames: ['route'],
      registers,
    }),
    ssfPushes: new Counter({
      name: 'gatehouse_ssf_pushes_total',
      help: 'Shared Signals pushes by outcome (delivered, retry, failed)',
      labelNames: ['outcome'],
      registers,
    }),
    verifiedTokenCache: new Counter({
      name: 'gatehouse_verified_token_cache_total',
      help: 'Tokens of ours presented again, by kind (access, transaction, authzen): hit (known good) or miss (its signature is verified); shared: told of by another worker',
      labelNames: ['kind', 'result'],
      registers,
    }),
    text: () => registry.metrics(),
    attach(sources) {
      new Gauge({
        name: 'gatehouse_processes',
        help: 'Processes whose metrics this answer adds up (the primary and every worker that answered in time)',
        registers,
        collect() {
          this.set(1);
        },
      });
      new Gauge({
        name: 'gatehouse_audit_backlog',
        help: 'Audit records waiting for their commit',
        registers,
        collect() {
          this.set(sources.auditBacklog());
        },
      });
      new Gauge({
        name: 'gatehouse_ssf_backlog',
        help: 'Shared Signals events waiting for delivery (all receivers)',
        // Read from the database: every process sees the same number.
        aggregator: 'max',
        registers,
        async collect() {
          try {
            this.set(await sources.ssfBacklog());
          } catch {
            /* the database cannot be read: /healthz says so */
          }
        },
      });
      new Gauge({
        name: 'gatehouse_policy_status',
        help: 'The policy in force (1 on its status): ok; stale (the stored set does not compile, the last one that did is in force); unavailable (none compiled, everything is denied)',
        labelNames: ['status'],
        aggregator: 'max',
        registers,
        async collect() {
          const state = await sources.policyState();
          for (const s of ['ok', 'stale', 'unavailable']) this.set({ status: s }, state.status === s ? 1 : 0);
        },
      });
      new Gauge({
        name: 'gatehouse_policy_info',
        help: 'The version of the policy in force (value 1)',
        labelNames: ['version'],
        aggregator: 'max',
        registers,
        async collect() {
          const state = await sources.policyState();
          this.reset();
          if (state.set) this.set({ version: state.set.version }, 1);
        },
      });
    },
  };
  return metrics;
}

// ---- Cluster: the primary adds up the workers' registries and its own. ----

const WANT = 'gatehouse:metrics:want';
const COLLECT = 'gatehouse:metrics:collect';
const PART = 'gatehouse:metrics:part';
const TEXT = 'gatehouse:metrics:text';
const CLUSTER_TIMEOUT_MS = 3000;

interface Message { type?: unknown; id?: unknown; metrics?: unknown; text?: unknown }

/**
 * In a worker: answers the primary's collection requests with this registry, and asks the
 * primary for the whole deployment's metrics (`text`). Outside a cluster, `text` is this registry's.
 */
export function workerMetrics(registry: Registry): { text(): Promise<string> } {
  if (!cluster.isWorker || !process.send) return { text: () => registry.metrics() };
  const waiting = new Map<string, (text: string | null) => void>();
  process.on('message', (m: Message) => {
    if (m?.type === COLLECT && typeof m.id === 'string') {
      void registry.getMetricsAsJSON().then(
        (metrics) => process.send?.({ type: PART, id: m.id, metrics }),
        () => process.send?.({ type: PART, id: m.id, metrics: [] }),
      );
    } else if (m?.type === TEXT && typeof m.id === 'string') {
      waiting.get(m.id)?.(typeof m.text === 'string' ? m.text : null);
      waiting.delete(m.id);
    }
  });
  return {
    text: () =>
      new Promise((resolve) => {
        const id = randomUUID();
        const timer = setTimeout(() => {
          waiting.delete(id);
          // The primary did not answer: this worker's own numbers, marked as such.
          void registry.metrics().then((own) => resolve(`# this worker's metrics only: the primary did not answer\n${own}`));
        }, CLUSTER_TIMEOUT_MS);
        waiting.set(id, (text) => {
          clearTimeout(timer);
          if (text !== null) resolve(text);
          else void registry.metrics().then(resolve);
        });
        process.send!({ type: WANT, id });
      }),
  };
}

/** In the primary: answers a worker's request with every worker's registry plus the primary's own, added up. */
export function serveClusterMetrics(primary: Registry): void {
  const collecting = new Map<string, { parts: object[][]; pending: number; done: () => void }>();
  cluster.on('message', (worker, m: Message) => {
    if (m?.type === PART && typeof m.id === 'string') {
      const c = collecting.get(m.id);
      if (!c) return;
      if (Array.isArray(m.metrics)) c.parts.push(m.metrics as object[]);
      if (--c.pending === 0) c.done();
      return;
    }
    if (m?.type !== WANT || typeof m.id !== 'string') return;
    const requestId = m.id;
    const workers = Object.values(cluster.workers ?? {}).filter((w) => w?.isConnected());
    const collectId = randomUUID();
    void primary.getMetricsAsJSON().then((own) => {
      const parts: object[][] = [own as object[]];
      const finish = () => {
        collecting.delete(collectId);
        clearTimeout(timer);
        let text: string | null;
        void (async () => {
          try {
            text = await AggregatorRegistry.aggregate<PrometheusContentType>(parts).metrics();
          } catch {
            text = null;
          }
          if (worker.isConnected()) worker.send({ type: TEXT, id: requestId, text });
        })();
      };
      // A worker that does not answer in time is left out rather than holding the scrape.
      const timer = setTimeout(finish, CLUSTER_TIMEOUT_MS - 500);
      collecting.set(collectId, { parts, pending: workers.length, done: finish });
      if (workers.length === 0) return finish();
      for (const w of workers) w!.send({ type: COLLECT, id: collectId });
    });
  });
}
