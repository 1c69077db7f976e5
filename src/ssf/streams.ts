import { z } from 'zod';
import type { AppContext } from '../context.js';
import { errors, validationError } from '../errors.js';
import { SUPPORTED_EVENT_TYPES } from '../signals.js';
import type { StreamFields, StreamRecord, SubjectFormat } from '../store/ssf.js';
import { canonicalKey } from './subjects.js';

export const PUSH_DELIVERY = 'urn:ietf:rfc:8935';
const POLL_DELIVERY = 'urn:ietf:rfc:8936';

const httpUrl = z
  .string()
  .max(2048)
  .refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), 'must be an absolute http or https URL')
  .refine((u) => !URL.canParse(u) || !new URL(u).hash, 'must have no fragment');

const delivery = z.looseObject({
  method: z.string().refine((m) => m === PUSH_DELIVERY, {
    message: `only push delivery (${PUSH_DELIVERY}) is supported`,
  }),
  endpoint_url: httpUrl,
  // sent verbatim as the Authorization header of each push; no line breaks (header injection)
  authorization_header: z
    .string()
    .min(1)
    .max(4096)
    .refine((h) => !/[\r\n\0]/.test(h), 'must not contain line breaks')
    .optional(),
});

const eventsRequested = z.array(z.string().min(1).max(512)).max(64);
const description = z.string().max(1000).nullable();
const aud = z.union([z.string().min(1).max(2048), z.array(z.string().min(1).max(2048)).min(1).max(16)]);
const format = z.enum(['iss_sub', 'email']);
const streamId = z.string().min(1).max(128);

/** Transmitter-supplied members a receiver may echo back; they must then match (SSF 1.0 §8.1.1.3). */
const transmitterSupplied = {
  iss: z.string().optional(),
  aud: aud.optional(),
  events_supported: z.array(z.string()).optional(),
  events_delivered: z.array(z.string()).optional(),
};

const createBody = z.looseObject({
  delivery: delivery.optional(),
  events_requested: eventsRequested.optional(),
  description: description.optional(),
  // our extensions, chosen by the receiver at creation: the SET audience and the subject format
  aud: aud.optional(),
  format: format.optional(),
});

const patchBody = z.looseObject({
  ...transmitterSupplied,
  stream_id: streamId,
  delivery: delivery.optional(),
  events_requested: eventsRequested.optional(),
  description: description.optional(),
  format: format.optional(),
});

const putBody = z.looseObject({
  ...transmitterSupplied,
  stream_id: streamId,
  delivery,
  events_requested: eventsRequested.optional(),
  description: description.optional(),
  format: format.optional(),
});

export const streamIdBody = z.looseObject({ stream_id: streamId });

/** Parses a JSON body with a schema: the management API's 400 naming each bad field. */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw errors.invalidRequest('the request body must be a JSON object (Content-Type: application/json)');
  }
  const r = schema.safeParse(body);
  if (!r.success) throw validationError(r.error);
  return r.data;
}

export function eventsDelivered(requested: string[]): string[] {
  const supported = new Set<string>(SUPPORTED_EVENT_TYPES);
  return [...new Set(requested.filter((e) => supported.has(e)))];
}

/**
 * A stored Authorization header as the stream's readers see it: its scheme, the credential
 * masked (`Bearer ****`). Sent back unchanged in an update, it keeps the stored header.
 */
export function maskedHeader(header: string): string {
  const space = header.indexOf(' ');
  return space > 0 ? `${header.slice(0, space)} ****` : '****';
}

/** The stream configuration of SSF 1.0 §8.1.1, plus our `format` extension; the Authorization header masked. */
export function streamView(ctx: AppContext, s: StreamRecord) {
  const authorizationHeader = s.authorization_header_enc ? maskedHeader(ctx.box.open(s.authorization_header_enc)) : undefined;
  return {
    stream_id: s.stream_id,
    iss: ctx.urls.issuer,
    aud: s.aud,
    delivery: {
      method: s.delivery_method,
      endpoint_url: s.endpoint_url,
      ...(authorizationHeader !== undefined ? { authorization_header: authorizationHeader } : {}),
    },
    events_supported: SUPPORTED_EVENT_TYPES,
    events_requested: s.events_requested,
    events_delivered: eventsDelivered(s.events_requested),
    ...(s.description != null ? { description: s.description } : {}),
    format: s.subject_format,
  };
}

function missingDelivery(): never {
  throw errors.invalidRequest(`delivery: required; poll delivery (${POLL_DELIVERY}) is not supported`, {
    issues: [{ path: 'delivery', message: `required: {method: "${PUSH_DELIVERY}", endpoint_url}`, code: 'invalid_type' }],
  });
}

function mismatch(field: string, message: string): never {
  throw errors.invalidRequest(`${field}: ${message}`, { issues: [{ path: field, message, code: 'custom' }] });
}

/** Echoed transmitter-supplied members must equal ours, before any update is applied. */
function checkTransmitterSupplied(ctx: AppContext, current: StreamRecord, body: z.infer<typeof patchBody>): void {
  if (body.iss !== undefined && body.iss !== ctx.urls.issuer) mismatch('iss', 'does not match the transmitter issuer');
  if (body.aud !== undefined && canonicalKey(body.aud) !== canonicalKey(current.aud)) mismatch('aud', 'cannot be changed');
  if (body.events_supported !== undefined && canonicalKey([...body.events_supported].sort()) !== canonicalKey([...SUPPORTED_EVENT_TYPES].sort())) {
    mismatch('events_supported', 'does not match the transmitter value');
  }
  if (
    body.events_delivered !== undefined &&
    canonicalKey([...body.events_delivered].sort()) !== canonicalKey(eventsDelivered(current.events_requested).sort())
  ) {
    mismatch('events_delivered', 'does not match the transmitter value');
  }
}

function sealHeader(ctx: AppContext, header: string | undefined, current?: StreamRecord): string | null {
  if (header === undefined) return null;
  // The masked form a reader was shown, sent back as it was: the stored header stays.
  if (current?.authorization_header_enc && header === maskedHeader(ctx.box.open(current.authorization_header_enc))) return current.authorization_header_enc;
  return ctx.box.seal(header);
}

/** Create: the receiver-supplied fields; `aud` defaults to the receiver endpoint's origin. */
export function fieldsForCreate(ctx: AppContext, raw: unknown): StreamFields {
  const body = parseBody(createBody, raw);
  if (!body.delivery) missingDelivery();
  return {
    aud: body.aud ?? new URL(body.delivery.endpoint_url).origin,
    delivery_method: body.delivery.method,
    endpoint_url: body.delivery.endpoint_url,
    authorization_header_enc: sealHeader(ctx, body.delivery.authorization_header),
    // a receiver that names no events gets every supported one; an explicit [] gets none
    events_requested: body.events_requested ?? [...SUPPORTED_EVENT_TYPES],
    description: body.description ?? null,
    subject_format: (body.format ?? 'iss_sub') as SubjectFormat,
  };
}

export function parsePatch(raw: unknown) {
  return parseBody(patchBody, raw);
}
export function parsePut(raw: unknown) {
  return parseBody(putBody, raw);
}

/** PATCH: members present change, members absent stay. */
export function fieldsForPatch(ctx: AppContext, current: StreamRecord, body: z.infer<typeof patchBody>): StreamFields {
  checkTransmitterSupplied(ctx, current, body);
  const f: StreamFields = { ...current };
  if (body.delivery) {
    f.delivery_method = body.delivery.method;
    f.endpoint_url = body.delivery.endpoint_url;
    f.authorization_header_enc = sealHeader(ctx, body.delivery.authorization_header, current);
  }
  if (body.events_requested !== undefined) f.events_requested = body.events_requested;
  if (body.description !== undefined) f.description = body.description;
  if (body.format !== undefined) f.subject_format = body.format;
  return f;
}

/** PUT: the whole receiver-supplied set; an absent member is deleted (back to its default). */
export function fieldsForPut(ctx: AppContext, current: StreamRecord, body: z.infer<typeof putBody>): StreamFields {
  checkTransmitterSupplied(ctx, current, body);
  return {
    aud: current.aud,
    delivery_method: body.delivery.method,
    endpoint_url: body.delivery.endpoint_url,
    authorization_header_enc: sealHeader(ctx, body.delivery.authorization_header, current),
    events_requested: body.events_requested ?? [...SUPPORTED_EVENT_TYPES],
    description: body.description ?? null,
    subject_format: body.format ?? 'iss_sub',
  };
}
