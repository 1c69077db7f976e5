import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RequestHandler } from 'express';
import { projectRoot } from '../paths.js';

const STATIC_DIR = join(projectRoot, 'src', 'console', 'static');
const TYPES: Record<string, string> = {
  'console.css': 'text/css; charset=utf-8',
  'console.js': 'text/javascript; charset=utf-8',
};

/** The console's two static files, read once: the only scripts and styles its pages may use. */
export function staticFiles(): RequestHandler {
  const files = new Map(Object.entries(TYPES).map(([name, type]) => [name, { type, body: readFileSync(join(STATIC_DIR, name)) }]));
  return (req, res, next) => {
    const file = files.get(String(req.params.file ?? ''));
    if (!file) return next();
    res.setHeader('Content-Type', file.type);
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.send(file.body);
  };
}
