import { existsSync } from 'node:fs';

/** Variables from ./.env, for the commands that read the server's configuration (serve, audit). */
export function loadDotEnv(): void {
  if (existsSync('.env')) process.loadEnvFile('.env');
}
