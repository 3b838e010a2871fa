// A real HTTP endpoint for subscription tests (API.md §8): records every notification it receives and answers as the
// test says (a status, or never).
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

export interface Receiver {
  url: string;
  /** `127.0.0.1:<port>`, for allowedOutboundHosts. */
  host: string;
  received: Received[];
  /** What to answer the next requests: a status, or `hang` (never answer). Default 200. */
  answer: (req: Received) => number | 'hang';
  /** Milliseconds to wait before answering each request (default 0): a slow endpoint, behind which events queue. */
  delayMs: number;
  /** Resolves once `n` requests (on `path`, when given) have arrived; rejects after `timeoutMs`. */
  waitFor(n: number, opts?: { path?: string; timeoutMs?: number }): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const waiters = new Set<() => void>();
  const hanging = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: Received = {
        path: req.url ?? '/',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      };
      received.push(r);
      for (const w of waiters) w();
      const answer = rec.answer(r);
      if (answer === 'hang') {
        hanging.add(res);
        return;
      }
      const reply = (): void => void res.writeHead(answer, { 'content-type': 'text/plain' }).end('ok');
      if (rec.delayMs > 0) setTimeout(reply, rec.delayMs);
      else reply();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const rec: Receiver = {
    url: `http://127.0.0.1:${port}`,
    host: `127.0.0.1:${port}`,
    received,
    answer: () => 200,
    delayMs: 0,
    waitFor(n, opts = {}) {
      const timeoutMs = opts.timeoutMs ?? 10_000;
      const mine = (): Received[] => received.filter((r) => !opts.path || r.path === opts.path);
      return new Promise((resolve, reject) => {
        const check = (): void => {
          if (mine().length < n) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(mine());
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`expected ${n} notifications on ${opts.path ?? '*'}, got ${mine().length}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
  return rec;
}
