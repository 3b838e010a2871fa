// Large request bodies are read and worked on a few at a time per process (http/plugins/large-bodies.ts): a request
// waiting for a slot has its body left unread, the queue beyond is refused with 429, and small requests never wait.
// Driven over raw connections so that a body can be held half-sent; assertions are on order, never on timings.
import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { connect, type Raw } from '../support/raw-http.js';

const THRESHOLD = 2000;

/** A batch Bundle creating `n` Patients, as JSON text (above THRESHOLD for n ≥ 30). */
function batch(n: number): string {
  const entry = Array.from({ length: n }, (_, i) => ({
    resource: { resourceType: 'Patient', name: [{ family: `Large${i}`, given: ['Body'] }] },
    request: { method: 'POST', url: 'Patient' },
  }));
  return JSON.stringify({ resourceType: 'Bundle', type: 'batch', entry });
}

function head(token: string, length: number, path = '/fhir/R4'): string {
  return (
    `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: application/fhir+json\r\nContent-Length: ${length}\r\n\r\n`
  );
}

/** Waits until the server's large-body slots are in this state. */
async function until(t: TestApp, running: number, waiting: number): Promise<void> {
  for (;;) {
    const s = t.app.largeBodies.state();
    if (s.running === running && s.waiting === waiting) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Resolves with the status of the first response on the connection. */
async function status(raw: Raw): Promise<number> {
  for (;;) {
    const m = /^HTTP\/1\.1 (\d{3})/.exec(raw.received());
    if (m && /\r\n\r\n/.test(raw.received())) return Number(m[1]);
    if (raw.socket.destroyed) throw new Error(`closed: ${raw.received()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

for (const database of testDatabases()) {
  describe(`large request bodies (${database.name})`, () => {
    let t: TestApp;
    let token: string;
    let port: number;
    beforeAll(async () => {
      t = await startTestApp(
        database,
        {},
        { largeBodies: { threshold: THRESHOLD, slots: 1, maxWaiting: 1 } },
      );
      token = (await t.newProject()).adminToken;
      await t.app.listen({ port: 0, host: '127.0.0.1' });
      port = (t.app.server.address() as net.AddressInfo).port;
    });
    afterAll(async () => t?.close());

    /** A holds the only slot with its body half sent; B (whole request sent) waits for it. */
    async function holdAndQueue(body: string): Promise<{ a: Raw; b: Raw }> {
      const a = await connect(port);
      a.socket.write(head(token, body.length) + body.slice(0, 100));
      await until(t, 1, 0);
      const b = await connect(port);
      b.socket.write(head(token, body.length) + body);
      await until(t, 1, 1);
      return { a, b };
    }

    it('works on one at a time, queues the next with its body unread, refuses beyond the queue, lets small ones by', async () => {
      const body = batch(40);
      expect(body.length).toBeGreaterThan(THRESHOLD);
      const { a, b } = await holdAndQueue(body);
      // C finds the queue full.
      const c = await connect(port);
      c.socket.write(head(token, body.length) + body);
      expect(await status(c)).toBe(429);
      expect(c.received()).toMatch(/retry-after: 2/i);
      expect(c.received()).toContain('Too many large requests at once');
      // A small request is not held up by them.
      const small = await t.request({
        method: 'POST',
        url: `${t.fhir}/Patient`,
        token,
        payload: { resourceType: 'Patient', name: [{ family: 'Small' }] },
      });
      expect(small.statusCode).toBe(201);
      // Nothing has answered A or B yet; once A's body is complete, A and then B are answered.
      expect(a.received()).toBe('');
      expect(b.received()).toBe('');
      a.socket.write(body.slice(100));
      expect(await status(a)).toBe(200);
      expect(await status(b)).toBe(200);
      for (const r of [a, b, c]) r.socket.destroy();
      await until(t, 0, 0);
      // Each slot came back: another large request runs at once.
      const d = await connect(port);
      d.socket.write(head(token, body.length) + body);
      expect(await status(d)).toBe(200);
      d.socket.destroy();
    });

    it('gives the slot back when the client goes away, waiting or half-way through its body', async () => {
      const body = batch(40);
      const { a, b } = await holdAndQueue(body);
      // B goes first while waiting, then A half-way through its body: both slots come back.
      b.socket.destroy();
      a.socket.destroy();
      await Promise.all([a.closed, b.closed]);
      await until(t, 0, 0);
      const c = await connect(port);
      c.socket.write(head(token, body.length) + body);
      expect(await status(c)).toBe(200);
      c.socket.destroy();
    });
  });
}
