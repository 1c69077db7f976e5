import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Router } from 'express';
import { projectRoot } from '../paths.js';

interface Asset {
  body: Buffer;
  etag: string;
}

function asset(file: string): Asset {
  const body = readFileSync(file);
  return { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` };
}

/** SimpleWebAuthn's browser bundle (it defines `SimpleWebAuthnBrowser`), from the installed package. */
function simpleWebAuthnBundle(): string {
  const main = createRequire(import.meta.url).resolve('@simplewebauthn/browser');
  return join(dirname(main), '..', 'dist', 'bundle', 'index.umd.min.js');
}

/** The script URLs a page with a passkey ceremony loads, in order. */
export const PASSKEY_SCRIPTS = ['/static/simplewebauthn-browser.js', '/static/passkeys.js'];

/**
 * The pages' scripts, served from our own origin so the Content-Security-Policy can say
 * `script-src 'self'` and nothing inline. Read once at start.
 */
export function staticRouter(): Router {
  const files: Record<string, Asset> = {
    '/static/simplewebauthn-browser.js': asset(simpleWebAuthnBundle()),
    '/static/passkeys.js': asset(join(projectRoot, 'src', 'pages', 'static', 'passkeys.js')),
  };
  const router = Router();
  for (const [path, file] of Object.entries(files)) {
    router.get(path, (req, res) => {
      res.setHeader('Content-Type', 'text/javascript; charset=utf-8');
      res.setHeader('Cache-Control', 'public, max-age=300');
      res.setHeader('X-Content-Type-Options', 'nosniff');
      res.setHeader('ETag', file.etag);
      if (req.get('if-none-match') === file.etag) return void res.status(304).end();
      res.send(file.body);
    });
  }
  return router;
}
