// `gatehouse serve`: ./.env, then the server as src/server.ts starts it from the environment.

import { loadDotEnv } from './env.js';

export async function serve(): Promise<void> {
  loadDotEnv();
  const { serve: serveFromEnvironment } = await import('../server.js');
  await serveFromEnvironment();
}
