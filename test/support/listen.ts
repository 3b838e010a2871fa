// A test app listening on a real port, for third-party clients that speak HTTP themselves (fetch, axios).
import net from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import type { TestDatabase } from './db.js';
import { startTestApp, type TestApp } from './app.js';

/** A TCP port free on 127.0.0.1 right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

/** Starts the app on a free port before the suite and closes it after; read `ctx.t` and `ctx.base` in tests. */
export function useListeningApp(database: TestDatabase): { t: TestApp; base: string } {
  const ctx = {} as { t: TestApp; base: string };
  beforeAll(async () => {
    const port = await freePort();
    ctx.base = `http://127.0.0.1:${port}/`;
    ctx.t = await startTestApp(database, { baseUrl: ctx.base });
    await ctx.t.app.listen({ port, host: '127.0.0.1' });
  });
  afterAll(async () => ctx.t?.close());
  return ctx;
}
