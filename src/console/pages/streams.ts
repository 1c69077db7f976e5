import type { Request, Response, Router } from 'express';
import type { AppContext } from '../../context.js';
import { SUPPORTED_EVENT_TYPES } from '../../signals.js';
import { createStream, deleteStream } from '../../ssf/router.js';
import { PUSH_DELIVERY, streamView } from '../../ssf/streams.js';
import { audited } from '../audit.js';
import { all, emptyForm, type FormState } from '../forms.js';
import { badge, button, checkbox, code, dangerForm, errorList, escapeHtml as e, hidden, input, select } from '../html.js';
import { asOneList, formPost, personOf, renderList, stateForm } from './common.js';

/** The event's short name: the last segment of its URI. */
const shortEvent = (uri: string) => uri.split('/').pop() ?? uri;

/** Where an SSF issue belongs: `delivery.endpoint_url` is the endpoint field. */
const streamField = (path: string) => (path.startsWith('delivery.') ? path.slice('delivery.'.length) : path === 'delivery' ? 'endpoint_url' : path.split('.')[0]!);

async function streamsPage(ctx: AppContext, req: Request, res: Response, f: FormState = emptyForm(), danger?: { id: string; state: FormState }): Promise<void> {
  const person = personOf(res);
  const streams = (await ctx.store.ssf.listStreams()).map((s) => ({ view: streamView(ctx, s), status: s.status }));
  const rows = streams.map(({ view: s, status }, i) => [
    `${code(s.stream_id)}${s.description ? `<br>${e(s.description)}` : ''}`,
    `${code(s.delivery.endpoint_url)}${s.delivery.authorization_header !== undefined ? `<br><small>with an Authorization header</small>` : ''}`,
    e(s.events_delivered.map(shortEvent).join(', ') || 'none'),
    badge(status, status === 'enabled' ? 'ok' : 'muted'),
    `${danger?.id === s.stream_id ? errorList(danger.state.general) : ''}${dangerForm('/console/streams/delete', person, 'Delete', 'Yes, delete this stream', `delete-stream-${i}`, hidden('stream_id', s.stream_id))}`,
  ]);
  const v = f.values;
  const chosen = new Set(v.events === undefined ? SUPPORTED_EVENT_TYPES : v.events.split('\n'));
  const events = SUPPORTED_EVENT_TYPES.map((uri, i) =>
    checkbox({ name: 'events', id: `event-${i}`, value: uri, label: shortEvent(uri), checked: chosen.has(uri) }),
  ).join('\n');
  const form = stateForm(
    '/console/streams',
    person,
    f,
    (at) => `${input({ ...at('endpoint_url'), label: 'Receiver endpoint (push, RFC 8935)', type: 'url', required: true, placeholder: 'https://receiver.example/events' })}
${input({ ...at('authorization_header'), value: '', label: 'Authorization header sent with each event (optional)', autocomplete: 'off' })}
${input({ ...at('description'), label: 'Description' })}
${select({ ...at('format'), label: 'Subject format', value: v.format ?? 'iss_sub', options: [['iss_sub', 'iss_sub (issuer and subject)'], ['email', 'email']] })}
<fieldset><legend>Events</legend>${f.errors.events_requested ? `<p class="field-error">${e(f.errors.events_requested.join(' '))}</p>` : ''}<div class="checks">${events}</div></fieldset>
${button('Create stream')}`,
  );
  renderList(ctx, req, res, f.status, {
    title: 'Shared Signals streams',
    section: 'streams',
    lead: `Receivers of security events (OpenID Shared Signals Framework 1.0), delivered by ${code('POST')} as Security Event Tokens.`,
    headers: ['Stream', 'Delivers to', 'Events', 'Status', ''],
    rows,
    empty: 'No streams yet.',
    create: { summary: 'Create a stream', form, open: !streams.length },
  });
}

export function streamPages(router: Router, ctx: AppContext): void {
  router.get('/streams', (req, res) => streamsPage(ctx, req, res));

  formPost(
    router, ctx, '/streams',
    async (req, res, v) => {
      const header = (v.authorization_header ?? '').trim();
      const stream = await createStream(
        ctx,
        {
          delivery: { method: PUSH_DELIVERY, endpoint_url: (v.endpoint_url ?? '').trim(), ...(header ? { authorization_header: header } : {}) },
          events_requested: all(req, 'events'),
          description: (v.description ?? '').trim() || null,
          format: v.format,
        },
        audited(ctx, personOf(res), (s) => ({ action: 'streams.create', target: `stream:${s.stream_id}`, details: { endpoint_url: s.endpoint_url, events_requested: s.events_requested } })),
      );
      return { message: `Stream ${stream.stream_id} created.`, to: '/console/streams' };
    },
    (req, res, refused) => streamsPage(ctx, req, res, refused),
    // The header is a secret, never shown again; the ticked events are.
    { field: streamField, shown: (v, req) => ({ ...v, authorization_header: '', events: all(req, 'events').join('\n') }) },
  );

  formPost(
    router, ctx, '/streams/delete',
    async (_req, res, v) => {
      const id = v.stream_id ?? '';
      await deleteStream(ctx, id, audited(ctx, personOf(res), () => ({ action: 'streams.delete', target: `stream:${id}` })));
      return { message: `Stream ${id} deleted.`, to: '/console/streams' };
    },
    (req, res, refused) => streamsPage(ctx, req, res, { ...emptyForm(), status: refused.status }, { id: refused.values.stream_id ?? '', state: asOneList(refused) }),
    { confirm: true },
  );
}
