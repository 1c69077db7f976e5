import { context, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, SimpleSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

/**
 * Traces with OpenTelemetry, off unless configured: OTEL_EXPORTER_OTLP_ENDPOINT (or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) sends spans over OTLP/HTTP, the exporter reading the
 * standard OTEL_* variables itself. One span per request, with the decision and its steps and
 * each database statement as children. While off, every helper here is a plain call.
 */

let provider: NodeTracerProvider | undefined;

export const tracingEnabled = (): boolean => provider !== undefined;

/** Whether the environment asks for traces. */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/**
 * Starts tracing for this process (once): spans go to `exporter` as they end (tests), or in
 * batches to the OTLP endpoint. Answers the shutdown, which flushes what is pending.
 */
export function startTracing(opts: { exporter?: SpanExporter; serviceName?: string } = {}): () => Promise<void> {
  if (provider) return async () => undefined;
  const processor = opts.exporter ? new SimpleSpanProcessor(opts.exporter) : new BatchSpanProcessor(new OTLPTraceExporter());
  const p = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': process.env.OTEL_SERVICE_NAME ?? opts.serviceName ?? 'gatehouse' }),
    spanProcessors: [processor],
  });
  p.register();
  provider = p;
  return async () => {
    if (provider !== p) return;
    provider = undefined;
    await p.shutdown();
    trace.disable();
    context.disable();
  };
}

const tracer = () => trace.getTracer('gatehouse');

/** The trace id of the active span, when tracing is on. */
export function activeTraceId(): string | undefined {
  if (!provider) return undefined;
  const span = trace.getActiveSpan();
  const id = span?.spanContext().traceId;
  return id && span.isRecording() ? id : undefined;
}

/** Runs `fn` inside a child span named `name` (when tracing is on); an error marks the span and goes on. */
export function inSpan<T>(name: string, attributes: Record<string, string | number | boolean | undefined>, fn: (span: Span | undefined) => T): T {
  if (!provider) return fn(undefined);
  return tracer().startActiveSpan(name, { attributes: clean(attributes) }, (span) => {
    const fail = (err: unknown) => {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
      span.end();
      throw err;
    };
    let out: T;
    try {
      out = fn(span);
    } catch (err) {
      return fail(err);
    }
    if (out instanceof Promise) {
      return out.then((v) => {
        span.end();
        return v;
      }, fail) as T;
    }
    span.end();
    return out;
  });
}

/** A database statement's span: the statement's first words, never its parameters. */
export function dbSpan<T>(system: 'sqlite' | 'postgresql', sql: string, fn: () => T): T {
  if (!provider) return fn();
  const operation = /^\s*(\w+)/.exec(sql)?.[1]?.toUpperCase() ?? 'SQL';
  return inSpan(`db ${operation}`, { 'db.system': system, 'db.statement': sql.length > 300 ? sql.slice(0, 300) : sql, 'db.operation': operation }, fn);
}

/**
 * The span of one HTTP request: started by the edge, made active for the rest of the
 * request's work (`run`), ended with the status and the route when the answer is sent.
 */
export function startRequestSpan(method: string, path: string): { span: Span; run: <T>(fn: () => T) => T } | undefined {
  if (!provider) return undefined;
  const span = tracer().startSpan(`${method}`, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method, 'url.path': path } });
  const ctx = trace.setSpan(context.active(), span);
  return { span, run: (fn) => context.with(ctx, fn) };
}

function clean(a: Record<string, string | number | boolean | undefined>): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(a)) if (v !== undefined) out[k] = v;
  return out;
}

/**
 * Express middleware that puts the request's span back as the active one: a body parser
 * resumes in the socket's async context, not the request's, so the steps after it would
 * otherwise start traces of their own.
 */
export function resumeRequestSpan(req: unknown, res: { locals: Record<string, unknown> }, next: () => void): void {
  void req;
  const run = res.locals.traceRun as ((fn: () => void) => void) | undefined;
  if (run) run(next);
  else next();
}
