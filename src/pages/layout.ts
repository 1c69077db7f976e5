import type { Response } from 'express';

const HTML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};

/** Escapes text for HTML element content and quoted attribute values. Everything shown passes through it. */
export function escapeHtml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"'`]/g, (c) => HTML_ESCAPES[c]!);
}

/** A hidden form input; name and value are escaped. */
export function hiddenInput(name: string, value: string): string {
  return `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`;
}

/** A message box; `kind` picks the colour. The text is escaped. */
export function notice(text: string, kind: 'error' | 'info' | 'ok' = 'error'): string {
  return `<p class="notice ${kind}" role="${kind === 'error' ? 'alert' : 'status'}">${escapeHtml(text)}</p>`;
}

const STYLE = `
body{font-family:system-ui,sans-serif;background:#f4f5f7;color:#1d2330;margin:0;line-height:1.4}
main{max-width:26rem;margin:4rem auto;background:#fff;padding:2rem;border-radius:8px;box-shadow:0 1px 4px #0002}
main.wide{max-width:46rem}
@media (max-width:32rem){main,main.wide{margin:0;border-radius:0;box-shadow:none;padding:1.2rem}}
h1{font-size:1.4rem;margin-top:0}h2{font-size:1.1rem;margin:2rem 0 .6rem;padding-top:1rem;border-top:1px solid #e3e5ea}
label{display:block;margin:.8rem 0 .3rem}
input[type=email],input[type=password],input[type=text]{width:100%;box-sizing:border-box;padding:.5rem;font-size:1rem}
button{margin-top:1rem;padding:.55rem 1.2rem;font-size:1rem;cursor:pointer}
.notice{padding:.6rem;border-radius:4px}.error{background:#fde8e8;color:#8a1c1c}.info{background:#e8f0fd}
ul.scopes li{margin:.2rem 0}
.passkey{margin-top:1.4rem;padding-top:1rem;border-top:1px solid #e3e5ea}
.passkey button{width:100%;margin-top:.4rem}
.muted{color:#5b6270;font-size:.92rem}
ul.items{list-style:none;padding:0;margin:0}
ul.items>li{border:1px solid #e3e5ea;border-radius:6px;padding:.8rem;margin:.6rem 0}
ul.items form{display:inline-block;margin:0 .4rem 0 0}
ul.items button,.inline button{margin-top:.5rem;padding:.35rem .8rem;font-size:.92rem}
.inline input[type=text]{width:auto;max-width:100%}
ul.items form.block,form.block{display:block;margin-top:.3rem}
label.check{display:inline-block;margin:.5rem .8rem 0 0;font-size:.92rem}
.tag{display:inline-block;font-size:.8rem;padding:.05rem .45rem;border-radius:9px;background:#e8f0fd;margin-left:.3rem}
.tag.warn{background:#fde8e8;color:#8a1c1c}
.qr{display:block;width:12rem;height:12rem;margin:.8rem 0;image-rendering:pixelated}
code.secret{word-break:break-all;font-size:1.05rem;letter-spacing:.05em}

.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
dl.profile{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem}dl.profile dt{color:#5b6270}dl.profile dd{margin:0;word-break:break-word}
`;

export interface PageOptions {
  /** a wider column (the account page) */
  wide?: boolean;
  /** same-origin script URLs, loaded with `defer` (the page must be sent with SCRIPT_PAGE_CSP) */
  scripts?: string[];
}

/**
 * The one page shell: a full HTML document around `bodyHtml`. `title` is escaped here;
 * `bodyHtml` must already be safe (built with escapeHtml).
 */
export function renderPage(title: string, bodyHtml: string, opts: PageOptions = {}): string {
  const scripts = (opts.scripts ?? []).map((src) => `<script src="${escapeHtml(src)}" defer></script>\n`).join('');
  return htmlDocument({
    title,
    referrer: 'no-referrer',
    head: `<style>${STYLE}</style>\n${scripts}`,
    body: `<main${opts.wide ? ' class="wide"' : ''}>
<h1>${escapeHtml(title)}</h1>
${bodyHtml}
</main>`,
  });
}

/**
 * A whole HTML document: the head every page shares (charset, viewport, referrer policy,
 * title; `title` is escaped here) with `head` added, around `body` (already safe markup).
 */
export function htmlDocument(p: { title: string; referrer: ReferrerPolicy; head: string; body: string }): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="${p.referrer}">
<title>${escapeHtml(p.title)}</title>
${p.head}</head>
<body>
${p.body}
</body>
</html>
`;
}

/** The referrer policies pages use: none at all (sign-in pages: codes in URLs), or same origin (the console: its POSTs carry their Origin). */
export type ReferrerPolicy = 'no-referrer' | 'same-origin';

/**
 * Sends a page with the headers every sign-in page carries: never cached, never framed
 * (clickjacking), no scripts, no referrer leaking codes or request ids.
 */
const PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'";

/**
 * The pages with a passkey ceremony (sign-in, account): scripts only from our own origin (files,
 * never inline), fetch only to our own origin.
 */
export const SCRIPT_PAGE_CSP =
  "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'";

/** Sends an HTML page that no one may cache or frame; `csp` replaces the default policy, `referrer` the default referrer policy. */
export function sendPage(res: Response, status: number, html: string, csp = PAGE_CSP, referrer: ReferrerPolicy = 'no-referrer'): void {
  res.status(status);
  res.setHeader('Content-Type', 'text/html; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Pragma', 'no-cache');
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', referrer);
  res.setHeader('Content-Security-Policy', csp);
  res.send(html);
}
