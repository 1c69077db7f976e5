import type { Request, Response, Router } from 'express';
import { rotateKeys } from '../../admin/keys.js';
import { parseWith } from '../../admin/route.js';
import { keysRotate } from '../../admin/schemas.js';
import type { AppContext } from '../../context.js';
import { RETIRED_KEY_PUBLISHED_SECONDS } from '../../store/keys.js';
import { audited } from '../audit.js';
import { formValues } from '../forms.js';
import { badge, button, code, escapeHtml as e, postForm, section, select, table, when } from '../html.js';
import { done, personOf, render } from './common.js';
import { nowSeconds, iso } from '../../clock.js';


async function keysPage(ctx: AppContext, req: Request, res: Response): Promise<void> {
  const now = nowSeconds(ctx.clock);
  const keys = await ctx.store.keys.published(now, RETIRED_KEY_PUBLISHED_SECONDS);
  const rows = keys.map((k) => [
    code(k.kid),
    e(k.alg),
    k.retired_at === null ? badge('signing', 'ok') : badge('retired', 'muted'),
    when(iso(k.created_at)),
    k.retired_at === null ? '' : `published until ${when(iso(k.retired_at + RETIRED_KEY_PUBLISHED_SECONDS))}`,
  ]);
  const form = postForm(
    '/console/keys/rotate',
    personOf(res),
    `${select({ name: 'alg', label: 'Rotate', value: '', options: [['', 'both (RS256 and EdDSA)'], ['RS256', 'RS256 only'], ['EdDSA', 'EdDSA only']] })}
${button('Rotate signing keys', { id: 'keys-rotate' })}`,
    { confirm: 'Make new signing keys now? The old ones stop signing and stay published for 24 hours.', cls: 'row' },
  );
  render(ctx, req, res, 200, {
    title: 'Keys',
    section: 'keys',
    lead: `The keys in the JWK Set (${code('/.well-known/jwks.json')}). A rotated key signs no more and stays published for 24 hours.`,
    body: `${table(['Key ID (kid)', 'Algorithm', 'State', 'Created', ''], rows)}
${section('Rotate', form)}`,
  });
}

export function keyPages(router: Router, ctx: AppContext): void {
  router.get('/keys', (req, res) => keysPage(ctx, req, res));
  router.post('/keys/rotate', async (req, res) => {
    const v = formValues(req);
    const { alg } = parseWith(keysRotate, v.alg ? { alg: v.alg } : {});
    const made = await rotateKeys(ctx, alg, audited(ctx, personOf(res), (keys) => ({ action: 'keys.rotate', target: 'keys', details: { keys } })));
    done(ctx, res, `New signing keys: ${made.map((k) => `${k.alg} ${k.kid}`).join(', ')}.`, '/console/keys');
  });
}
