import { createHash } from 'node:crypto';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { Request, Response } from 'express';
import { escapeHtml, sendPage } from '../pages/layout.js';

/** Size limits of a SAML message: enough for any AuthnRequest, too little for a zip bomb. */
const MAX_ENCODED = 64 * 1024;
const MAX_XML = 256 * 1024;

export class BindingError extends Error {}

export interface BindingMessage {
  binding: 'redirect' | 'post';
  /** the SAMLRequest or SAMLResponse, base64 as sent */
  encoded: string;
  relayState?: string;
}

/** The message of the HTTP-Redirect (GET query) or HTTP-POST (form body) binding. */
export function readBindingMessage(req: Request, field: 'SAMLRequest' | 'SAMLResponse'): BindingMessage | undefined {
  const post = req.method === 'POST';
  const source = (post ? req.body : req.query) as Record<string, unknown> | undefined;
  const encoded = source?.[field];
  if (typeof encoded !== 'string' || encoded === '') return undefined;
  const relay = source?.RelayState;
  return { binding: post ? 'post' : 'redirect', encoded, relayState: typeof relay === 'string' && relay !== '' ? relay : undefined };
}

/** The XML text: base64, and for HTTP-Redirect DEFLATE (raw) first; bounded in size. */
export function decodeBindingMessage(m: BindingMessage): string {
  if (m.encoded.length > MAX_ENCODED) throw new BindingError('the SAML message is too large');
  const compact = m.encoded.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact)) throw new BindingError('the SAML message is not base64');
  const bytes = Buffer.from(compact, 'base64');
  if (m.binding === 'post') return bytes.toString('utf8');
  try {
    return inflateRawSync(bytes, { maxOutputLength: MAX_XML }).toString('utf8');
  } catch {
    throw new BindingError('the SAML message is not DEFLATE-encoded (HTTP-Redirect binding)');
  }
}

/** base64(DEFLATE(xml)): the HTTP-Redirect encoding. */
export const deflateForRedirect = (xml: string): string => deflateRawSync(Buffer.from(xml, 'utf8')).toString('base64');

const AUTO_SUBMIT = 'document.forms[0].submit();';
const AUTO_SUBMIT_HASH = `'sha256-${createHash('sha256').update(AUTO_SUBMIT).digest('base64')}'`;

/**
 * The HTTP-POST binding: a page whose form posts `SAMLResponse` (and `RelayState`) to the SP,
 * submitted by a script allowed by its hash, with a button when scripts are off.
 */
export function sendPostForm(res: Response, action: string, fields: Record<string, string | undefined>): void {
  const inputs = Object.entries(fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `<input type="hidden" name="${escapeHtml(k)}" value="${escapeHtml(v)}">`)
    .join('\n');
  const html = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="referrer" content="no-referrer"><title>Signing in</title></head>
<body>
<form method="post" action="${escapeHtml(action)}">
${inputs}
<noscript><button type="submit">Continue</button></noscript>
</form>
<script>${AUTO_SUBMIT}</script>
</body>
</html>
`;
  sendPage(res, 200, html, `default-src 'none'; script-src ${AUTO_SUBMIT_HASH}; frame-ancestors 'none'; base-uri 'none'`);
}
