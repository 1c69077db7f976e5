import { Router, type Request, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import { requireAdmin } from '../admin/auth.js';
import type { AppContext } from '../context.js';
import { randomToken } from '../crypto/hash.js';
import { nowSeconds } from '../clock.js';
import { errors } from '../errors.js';
import type { Store } from '../store/index.js';
import type { OutboxEvent, OutboxState, StreamFields, StreamRecord } from '../store/ssf.js';
import { mayReachPrivate, outboundProblem } from '../outbound.js';
import { enqueueVerification } from './sink.js';
import {
  fieldsForCreate,
  fieldsForPatch,
  fieldsForPut,
  parseBody,
  parsePatch,
  parsePut,
  streamIdBody,
  streamView,
} from './streams.js';
import { canonicalKey, subjectIdSchema } from './subjects.js';

const statusBody = z.looseObject({
  stream_id: z.string().min(1).max(128),
  status: z.enum(['enabled', 'paused', 'disabled']),
  reason: z.string().max(1000).optional(),
});
const addSubjectBody = z.looseObject({
  stream_id: z.string().min(1).max(128),
  subject: subjectIdSchema,
  verified: z.boolean().optional(),
});
const removeSubjectBody = z.looseObject({ stream_id: z.string().min(1).max(128), subject: subjectIdSchema });
const verifyBody = z.looseObject({ stream_id: z.string().min(1).max(128), state: z.string().max(1024).optional() });

const OUTBOX_STATES: OutboxState[] = ['pending', 'delivered', 'failed', 'dropped'];

const noStore: RequestHandler = (_req, res, next) => {
  res.setHeader('Cache-Control', 'no-store');
  next();
};

function queryStreamId(req: Request, required: boolean): string | undefined {
  const v = req.query.stream_id;
  if (v === undefined && !required) return undefined;
  if (typeof v !== 'string' || !v) {
    throw errors.invalidRequest('stream_id: required query parameter', {
      issues: [{ path: 'stream_id', message: 'required query parameter', code: 'invalid_type' }],
    });
  }
  return v;
}

/** SSF endpoints answer 404 for a stream this receiver does not have. */
async function loadStream(store: Store, id: string): Promise<StreamRecord> {
  const s = await store.ssf.getStream(id);
  if (!s) throw errors.notFound(`no stream ${JSON.stringify(id)}`);
  return s;
}

/** One stream per receiver endpoint: a second stream on the same `endpoint_url` is a 409. */
async function assertEndpointFree(store: Store, fields: StreamFields, selfId?: string): Promise<void> {
  const other = await store.ssf.streamByEndpoint(fields.endpoint_url);
  if (other && other.stream_id !== selfId) {
    throw errors.conflict(`a stream already delivers to this endpoint_url: ${other.stream_id}`, { stream_id: other.stream_id });
  }
}

/** The receiver's endpoint must be one the outbound rules let us reach (checked again at each push; a name that does not resolve yet is accepted). */
async function assertEndpointReachable(ctx: AppContext, fields: StreamFields): Promise<void> {
  const problem = await outboundProblem(fields.endpoint_url, mayReachPrivate(ctx.config, fields.endpoint_url), { unresolved: 'accept' });
  if (problem) {
    const path = 'delivery.endpoint_url';
    throw errors.invalidRequest(`${path}: ${problem}`, { issues: [{ path, message: problem, code: 'custom' }] });
  }
}

/** Creates a stream from a receiver's request body (one stream per endpoint_url). */
export async function createStream(ctx: AppContext, raw: unknown, record?: (tx: Store, stream: StreamRecord) => Promise<void>): Promise<StreamRecord> {
  const fields = fieldsForCreate(ctx, raw);
  await assertEndpointReachable(ctx, fields);
  return ctx.store.transaction(async (tx) => {
    await assertEndpointFree(tx, fields);
    const stream = await tx.ssf.createStream(randomToken(16), fields);
    await record?.(tx, stream);
    return stream;
  });
}

/** Deletes a stream with its subjects and undelivered events. */
export async function deleteStream(ctx: AppContext, id: string, record?: (tx: Store) => Promise<void>): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    if (!(await tx.ssf.deleteStream(id))) throw errors.notFound(`no stream ${JSON.stringify(id)}`);
    await record?.(tx);
  });
}

function outboxView(e: OutboxEvent) {
  return {
    jti: e.jti,
    stream_id: e.stream_id,
    event_type: e.event_type,
    state: e.state,
    attempts: e.attempts,
    last_error: e.last_error,
    created_at: e.created_at,
    next_attempt_at: e.state === 'pending' ? Math.ceil(e.next_attempt_at / 1000) : null,
    delivered_at: e.delivered_at,
  };
}

/**
 * The stream management API of OpenID Shared Signals Framework 1.0 (§8), with the management
 * API's admin bearer token. Each endpoint: parse, load, check, change (in one transaction), answer.
 */
export function ssfRouter(ctx: AppContext): Router {
  const router = Router();
  router.use('/v1/ssf', noStore, requireAdmin(ctx));

  // Create a stream
  router.post('/v1/ssf/streams', async (req, res: Response) => {
    const stream = await createStream(ctx, req.body);
    req.log.info({ stream_id: stream.stream_id }, 'ssf stream created');
    res.status(201).json(streamView(ctx, stream));
  });

  // Read one stream, or the list
  router.get('/v1/ssf/streams', async (req, res) => {
    const id = queryStreamId(req, false);
    if (id === undefined) {
      res.json((await ctx.store.ssf.listStreams()).map((s) => streamView(ctx, s)));
      return;
    }
    res.json(streamView(ctx, await loadStream(ctx.store, id)));
  });

  // Update (PATCH) and replace (PUT)
  const change = (parse: typeof parsePatch | typeof parsePut, merge: typeof fieldsForPatch | typeof fieldsForPut) =>
    (async (req, res) => {
      const body = parse(req.body);
      const current = await loadStream(ctx.store, body.stream_id);
      await assertEndpointReachable(ctx, merge(ctx, current, body as never));
      const stream = await ctx.store.transaction(async (tx) => {
        const current = await loadStream(tx, body.stream_id);
        const fields = merge(ctx, current, body as never);
        await assertEndpointFree(tx, fields, current.stream_id);
        return (await tx.ssf.updateStream(current.stream_id, fields))!;
      });
      res.json(streamView(ctx, stream));
    }) satisfies RequestHandler;
  router.patch('/v1/ssf/streams', change(parsePatch, fieldsForPatch));
  router.put('/v1/ssf/streams', change(parsePut, fieldsForPut));

  // Delete: the stream, its subjects and its undelivered events
  router.delete('/v1/ssf/streams', async (req, res) => {
    const id = queryStreamId(req, true)!;
    await deleteStream(ctx, id);
    req.log.info({ stream_id: id }, 'ssf stream deleted');
    res.status(204).end();
  });

  // Status
  router.get('/v1/ssf/status', async (req, res) => {
    const s = await loadStream(ctx.store, queryStreamId(req, true)!);
    res.json({ stream_id: s.stream_id, status: s.status, ...(s.status_reason ? { reason: s.status_reason } : {}) });
  });
  router.post('/v1/ssf/status', async (req, res) => {
    const body = parseBody(statusBody, req.body);
    const s = await ctx.store.transaction(async (tx) => {
      await loadStream(tx, body.stream_id);
      await tx.ssf.setStatus(body.stream_id, body.status, body.reason ?? null);
      return loadStream(tx, body.stream_id);
    });
    req.log.info({ stream_id: s.stream_id, status: s.status }, 'ssf stream status changed');
    res.json({ stream_id: s.stream_id, status: s.status, ...(s.status_reason ? { reason: s.status_reason } : {}) });
  });

  // Subjects (the `:` is literal in these paths, not a route parameter)
  router.post('/v1/ssf/subjects\\:add', async (req, res) => {
    const body = parseBody(addSubjectBody, req.body);
    await ctx.store.transaction(async (tx) => {
      await loadStream(tx, body.stream_id);
      await tx.ssf.addSubject(body.stream_id, canonicalKey(body.subject), body.subject, body.verified ?? true);
    });
    res.status(200).end();
  });
  router.post('/v1/ssf/subjects\\:remove', async (req, res) => {
    const body = parseBody(removeSubjectBody, req.body);
    await ctx.store.transaction(async (tx) => {
      await loadStream(tx, body.stream_id);
      // removing a subject that was never added is not an error (SSF lets us stay silent)
      await tx.ssf.removeSubject(body.stream_id, canonicalKey(body.subject));
    });
    res.status(204).end();
  });

  // Verification: a verification SET carrying `state`, delivered like any other event
  router.post('/v1/ssf/verify', async (req, res) => {
    const body = parseBody(verifyBody, req.body);
    await ctx.store.transaction(async (tx) => {
      const s = await loadStream(tx, body.stream_id);
      // a disabled stream holds nothing, a verification event included
      if (s.status !== 'disabled') await enqueueVerification(tx, ctx.urls.issuer, s, body.state, nowSeconds(ctx.clock));
    });
    res.status(204).end();
  });

  // Delivery state of a stream's events (our addition): failed ones stay visible here
  router.get('/v1/ssf/events', async (req, res) => {
    const id = queryStreamId(req, true)!;
    await loadStream(ctx.store, id);
    const state = req.query.state;
    if (state !== undefined && !OUTBOX_STATES.includes(state as OutboxState)) {
      throw errors.invalidRequest(`state: must be one of ${OUTBOX_STATES.join(', ')}`, {
        issues: [{ path: 'state', message: `must be one of ${OUTBOX_STATES.join(', ')}`, code: 'invalid_value' }],
      });
    }
    const limitRaw = req.query.limit;
    const limit = typeof limitRaw === 'string' && /^\d{1,4}$/.test(limitRaw) ? Math.max(1, Math.min(1000, Number(limitRaw))) : 100;
    const data = (await ctx.store.ssf.events(id, (state as OutboxState | undefined) ?? null, limit)).map(outboxView);
    res.json({ data });
  });
  // Puts a stream's failed events back in the queue
  router.post('/v1/ssf/events\\:retry', async (req, res) => {
    const body = parseBody(streamIdBody, req.body);
    const requeued = await ctx.store.transaction(async (tx) => {
      await loadStream(tx, body.stream_id);
      return await tx.ssf.retryFailed(body.stream_id);
    });
    res.json({ stream_id: body.stream_id, requeued });
  });

  return router;
}
