import type { Server } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';

/** How long a stopping process lets requests in flight finish before it closes what is left. */
export const DRAIN_GRACE_MS = 10_000;
/** How often a draining server looks for kept-alive connections gone idle. */
const SWEEP_MS = 100;

interface ConnectionState { active: number; served: number }

const connections = new WeakMap<Server, Set<Socket>>();
const states = new WeakMap<Socket, ConnectionState>();

/**
 * Follows the server's connections, and on each whether a request is being answered and whether
 * one was: what a graceful stop needs to close only connections that are truly idle. (Node's
 * own `closeIdleConnections` also closes a connection accepted a moment ago whose request has
 * not been read yet: its client, a proxy, would see that request reset.)
 */
export function trackConnections(server: Server): void {
  const sockets = new Set<Socket>();
  connections.set(server, sockets);
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    states.set(socket, { active: 0, served: 0 });
    socket.once('close', () => sockets.delete(socket));
  });
  server.prependListener('request', (req, res) => {
    const state = states.get(req.socket);
    if (!state) return;
    state.active++;
    res.once('close', () => {
      state.active--;
      state.served++;
    });
  });
}

/**
 * A graceful stop of the HTTP server (SIGTERM): no new connections (the listening socket
 * closes, so a proxy's next connection is refused and goes elsewhere); every request in flight,
 * and every request on a connection already accepted, answered with `Connection: close`;
 * kept-alive connections closed once idle. Resolves when the last connection has ended, or after
 * `graceMs`, when whatever is left is closed.
 *
 * With `noticeMs`, the socket first stays open that long (the caller has /healthz answer 503
 * `draining` meanwhile) and everything else is served as before (each answer with `Connection: close`): a load
 * balancer that follows health takes the instance out of rotation before it stops listening,
 * so no connection of its meets the closing socket. (Without notice, a connection that reaches
 * the socket's queue in the instant between its last accept and its close is reset.)
 */
export async function drainServer(server: Server, graceMs = DRAIN_GRACE_MS, noticeMs = 0): Promise<void> {
  const sockets = connections.get(server) ?? new Set<Socket>();
  // First in line, before the app writes anything.
  server.prependListener('request', (_req, res) => {
    if (!res.headersSent) res.setHeader('Connection', 'close');
  });
  if (noticeMs > 0) await new Promise((r) => setTimeout(r, noticeMs));
  return new Promise<void>((resolve) => {
    let sweep: NodeJS.Timeout | undefined;
    const done = () => {
      clearTimeout(deadline);
      clearInterval(sweep);
      resolve();
    };
    const deadline = setTimeout(() => {
      server.closeAllConnections();
      done();
    }, graceMs);
    deadline.unref();
    // Stop listening only: http.Server#close would also drop connections accepted a moment ago.
    // After one turn of the event loop: its poll phase accepts every connection already queued
    // on the listening socket (closing it at once would reset those, requests already sent).
    setImmediate(() => NetServer.prototype.close.call(server, done));
    const closeIdle = () => {
      for (const socket of sockets) {
        const state = states.get(socket);
        if (state && state.active === 0 && state.served > 0) socket.destroy();
      }
    };
    closeIdle();
    sweep = setInterval(closeIdle, SWEEP_MS);
    sweep.unref();
  });
}
