import type { Server } from 'node:http';

/** How long a stopping process lets requests in flight finish before it closes what is left. */
export const DRAIN_GRACE_MS = 10_000;

/**
 * A graceful stop of the HTTP server (SIGTERM): no new connections (the listening socket
 * closes, so a proxy's next connect is refused and goes elsewhere), every request in flight
 * answered, each of those answers closing its connection (`Connection: close`, so no client
 * sends another request on it), idle kept-alive connections closed at once. Resolves when the
 * last connection has ended, or after `graceMs`, when whatever is left is closed.
 */
export function drainServer(server: Server, graceMs = DRAIN_GRACE_MS): Promise<void> {
  // First in line, before the app writes anything.
  server.prependListener('request', (_req, res) => {
    if (!res.headersSent) res.setHeader('Connection', 'close');
  });
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      server.closeAllConnections();
      resolve();
    }, graceMs);
    timer.unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
    // A kept-alive connection whose request was in flight becomes idle once answered: the
    // answer says close, and this catches a client that keeps it open anyway.
    const sweep = setInterval(() => server.closeIdleConnections(), 250);
    sweep.unref();
    server.once('close', () => clearInterval(sweep));
  });
}
