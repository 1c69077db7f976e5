import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';

export interface Push {
  contentType: string | undefined;
  authorization: string | undefined;
  body: string;
  /** the status the receiver answered */
  status: number;
}

export interface VerifiedSet {
  header: { typ?: string; alg?: string; kid?: string };
  claims: JWTPayload & {
    txn?: string;
    sub_id?: Record<string, unknown>;
    events?: Record<string, Record<string, unknown>>;
  };
  type: string;
  event: Record<string, unknown>;
}

/**
 * An RFC 8935 push receiver on a local port. `respond` picks the status for each push
 * (default 202); every push is recorded, accepted ones are also listed in `accepted`.
 */
export class Receiver {
  readonly pushes: Push[] = [];
  respond: (n: number, req: IncomingMessage) => number = () => 202;
  private server: Server | undefined;
  private waiters: (() => void)[] = [];

  constructor(public port = 0) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}/events`;
  }

  async start(): Promise<this> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const status = this.respond(this.pushes.length, req);
        this.pushes.push({
          contentType: req.headers['content-type'],
          authorization: req.headers.authorization,
          body: Buffer.concat(chunks).toString('utf8'),
          status,
        });
        res.writeHead(status, status === 202 ? {} : { 'content-type': 'application/json' });
        res.end(status === 202 ? '' : JSON.stringify({ err: 'invalid_request', description: 'try again' }));
        for (const w of this.waiters.splice(0)) w();
      });
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this;
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    await new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections();
    });
  }

  get accepted(): Push[] {
    return this.pushes.filter((p) => p.status === 202);
  }

  /** Resolves once `pred` holds over the pushes so far (checked on each push), or rejects after `ms`. */
  async waitFor(pred: (r: this) => boolean, ms = 10_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!pred(this)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`receiver: condition not met within ${ms} ms (${this.pushes.length} pushes)`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }
}

/** Verifies a pushed SET against the server's JWK Set, as a real receiver would. */
export function setVerifier(baseUrl: string, issuer = baseUrl) {
  const jwks = createRemoteJWKSet(new URL(`${baseUrl}/.well-known/jwks.json`));
  return async (jwt: string, audience: string | string[]): Promise<VerifiedSet> => {
    const { payload, protectedHeader } = await jwtVerify(jwt, jwks, { issuer, audience, typ: 'secevent+jwt' });
    const events = (payload as VerifiedSet['claims']).events ?? {};
    const [type, event] = Object.entries(events)[0] ?? ['', {}];
    return { header: protectedHeader, claims: payload as VerifiedSet['claims'], type, event };
  };
}
