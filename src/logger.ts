import { pino, type Logger } from 'pino';

/** JSON logs on stdout. Secrets, tokens and bodies are never logged; `redact` is a second line of defence. */
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { pid: process.pid },
    redact: {
      paths: ['req.headers.authorization', 'req.headers.cookie', '*.password', '*.client_secret', '*.token', '*.refresh_token'],
      censor: '[redacted]',
    },
  });
}

export type { Logger };
