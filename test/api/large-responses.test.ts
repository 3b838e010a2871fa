// Large responses (issue 25 point 7): a Binary read as FHIR JSON is streamed, its base64 `data` encoded piece by
// piece as the file store is read, never built as one string; a read whose response is large (raw or JSON) takes
// one of the large-body slots (http/plugins/large-bodies.ts) before it is produced and gives it back when the
// response ends or the client goes away; a Bundle inlines a bounded amount of Binary content.
// The file store is wrapped so that a test can hold a read half-way (a gate): assertions are on order, never on time.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileStoreFor } from '../../src/storage/db-files.js';
import type { Db } from '../../src/storage/db.js';
import type { FileStore } from '../../src/storage/files.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { connect, type Raw } from '../support/raw-http.js';

const THRESHOLD = 64 * 1024;
/** The pieces the wrapped store yields (not a multiple of 3, so the encoder carries bytes between pieces). */
const PIECE = 10_000;

/** A file store whose Binary reads yield pieces of PIECE bytes and wait at `gate` before each but the first while it is closed. */
function gatedStore(inner: FileStore) {
  let gate: Promise<void> | undefined;
  let release = (): void => undefined;
  let pieces = 0;
  async function* sliced(stream: Readable): AsyncGenerator<Buffer> {
    let first = true;
    for await (const chunk of stream) {
      const buf = Buffer.from(chunk as Uint8Array);
      for (let at = 0; at < buf.length; at += PIECE) {
        if (!first && gate) await gate;
        first = false;
        pieces++;
        yield buf.subarray(at, at + PIECE);
      }
    }
  }
  const store: FileStore = {
    ...inner,
    async read(key) {
      const stream = await inner.read(key);
      if (!stream || !key.startsWith('binary/')) return stream;
      return Readable.from(sliced(stream), { objectMode: false });
    },
  };
  return {
    store,
    /** Pieces read from the store so far. */
    pieces: () => pieces,
    close() {
      gate = new Promise((r) => (release = r));
    },
    open() {
      gate = undefined;
      release();
    },
  };
}

/**
 * Polls `done` every 10 ms. Not a timing assertion: the deadline only turns what would hang (the unfixed code never
 * sends a byte while the store is held) into a failure that still runs the test's `finally`.
 */
async function poll(done: () => boolean, what: () => string): Promise<void> {
  for (let i = 0; !done(); i++) {
    if (i > 3000) throw new Error(`never happened: ${what()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Waits until the server's large-body slots are in this state. */
async function until(t: TestApp, running: number, waiting: number): Promise<void> {
  await poll(
    () => t.app.largeBodies.state().running === running && t.app.largeBodies.state().waiting === waiting,
    () =>
      `slots ${JSON.stringify(t.app.largeBodies.state())}, expected ${running} running, ${waiting} waiting`,
  );
}

async function received(raw: Raw, what: string): Promise<void> {
  await poll(
    () => raw.received().includes(what) || raw.socket.destroyed,
    () => `${what.slice(0, 40)} in ${raw.received().slice(0, 300)}`,
  );
  if (!raw.received().includes(what)) throw new Error(`closed: ${raw.received().slice(0, 300)}`);
}

/** The body of a complete HTTP/1.1 response with a Content-Length. */
async function bodyOf(raw: Raw): Promise<{ head: string; body: string }> {
  for (;;) {
    const text = raw.received();
    const end = text.indexOf('\r\n\r\n');
    const length = /\r\ncontent-length: (\d+)/i.exec(text)?.[1];
    if (end >= 0 && length !== undefined && text.length - end - 4 >= Number(length))
      return { head: text.slice(0, end), body: text.slice(end + 4, end + 4 + Number(length)) };
    if (raw.socket.destroyed) throw new Error(`closed: ${text.slice(0, 300)}`);
    await received(raw, '\r\n\r\n');
    const size = raw.received().length;
    await poll(
      () => raw.received().length > size || raw.socket.destroyed,
      () => `more than ${size} bytes`,
    );
  }
}

function outcome(res: LightMyRequestResponse | { status: string; outcome?: unknown }): {
  status: number;
  code: string;
  text: string;
} {
  const status = 'statusCode' in res ? res.statusCode : Number(res.status.split(' ')[0]);
  const body = ('statusCode' in res ? res.json() : res.outcome) as {
    resourceType: string;
    issue: { code: string; details?: { text?: string } }[];
  };
  expect(body.resourceType, JSON.stringify(body)).toBe('OperationOutcome');
  return { status, code: body.issue[0]?.code ?? '', text: body.issue[0]?.details?.text ?? '' };
}

describe.each(testDatabases())('large responses on $name', (database) => {
  let t: TestApp;
  let db: Db;
  let dataDir: string;
  let gated: ReturnType<typeof gatedStore>;
  let token: string;
  let otherToken: string;
  let port: number;
  /** Not a multiple of 3 bytes, above THRESHOLD. */
  const big = randomBytes(200_001);
  let bigId: string;
  let smallId: string;
  let patientId: string;

  const upload = async (bytes: Buffer, as = token): Promise<string> => {
    const res = await t.request({
      method: 'POST',
      url: `${t.fhir}/Binary`,
      token: as,
      headers: { 'content-type': 'application/octet-stream' },
      payload: bytes,
    });
    expect(res.statusCode, res.body).toBe(201);
    return (res.json() as { id: string }).id;
  };
  const get = (url: string, as = token) => t.request({ method: 'GET', url: `${t.fhir}/${url}`, token: as });
  const rawGet = (raw: Raw, url: string): void => {
    raw.socket.write(`GET ${t.fhir}/${url} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`);
  };

  beforeAll(async () => {
    db = await database.open();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-large-responses-'));
    gated = gatedStore(fileStoreFor(db, dataDir));
    t = await startTestApp(
      database,
      { dataDir, binaryMaxBytes: 4 * 1024 * 1024 },
      { db, files: gated.store, largeBodies: { threshold: THRESHOLD, slots: 1, maxWaiting: 0 } },
    );
    token = (await t.newProject()).adminToken;
    const other = await t.newProject();
    otherToken = other.adminToken;
    bigId = await upload(big);
    smallId = await upload(Buffer.from('small'));
    const patient = await t.request({
      method: 'POST',
      url: `${t.fhir}/Patient`,
      token: otherToken,
      payload: { resourceType: 'Patient', name: [{ family: 'Other' }] },
    });
    patientId = (patient.json() as { id: string }).id;
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    gated?.open();
    await t?.close();
    await db?.close();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers a large Binary as FHIR JSON with exactly its bytes, in read, vread and _elements', async () => {
    for (const url of [
      `Binary/${bigId}?_format=json`,
      `Binary/${bigId}/_history/1?_format=json`,
      `Binary/${bigId}?_format=json&_elements=data`,
    ]) {
      const res = await get(url);
      expect(res.statusCode, url).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/fhir\+json/);
      expect(res.headers.etag).toBe('W/"1"');
      expect(Number(res.headers['content-length'])).toBe(res.rawPayload.length);
      const body = res.json() as { resourceType: string; id: string; contentType: string; data: string };
      expect([body.resourceType, body.id]).toEqual(['Binary', bigId]);
      if (!url.includes('_elements')) expect(body.contentType).toBe('application/octet-stream');
      expect(Buffer.from(body.data, 'base64').equals(big), url).toBe(true);
      expect(body.data).toBe(big.toString('base64'));
    }
    // _summary=true has no `data` (Binary.data is not a summary element).
    const summary = await get(`Binary/${bigId}?_format=json&_summary=true`);
    expect(summary.statusCode).toBe(200);
    expect((summary.json() as { data?: string }).data).toBeUndefined();
    expect((summary.json() as { contentType: string }).contentType).toBe('application/octet-stream');
    const raw = await get(`Binary/${bigId}`);
    expect(raw.rawPayload.equals(big)).toBe(true);
    expect((await get(`Binary/${bigId}`, otherToken)).statusCode).toBe(404);
    const notModified = await t.request({
      method: 'GET',
      url: `${t.fhir}/Binary/${bigId}?_format=json`,
      token,
      headers: { 'if-none-match': 'W/"1"' },
    });
    expect(notModified.statusCode).toBe(304);
    await until(t, 0, 0);
  });

  it('streams the JSON while the file store is still being read', { timeout: 60_000 }, async () => {
    gated.close();
    const before = gated.pieces();
    const a = await connect(port);
    try {
      rawGet(a, `Binary/${bigId}?_format=json`);
      // The first piece's base64 (9,999 bytes: whole 3-byte groups) is on the wire while the read waits at the gate.
      await received(a, `"data":"${big.subarray(0, PIECE - (PIECE % 3)).toString('base64')}`);
      expect(gated.pieces() - before).toBe(1);
      gated.open();
      const { head, body } = await bodyOf(a);
      expect(head).toMatch(/^HTTP\/1\.1 200/);
      expect(Buffer.from((JSON.parse(body) as { data: string }).data, 'base64').equals(big)).toBe(true);
      expect(gated.pieces() - before).toBeGreaterThan(Math.floor(big.length / PIECE));
    } finally {
      gated.open();
      a.socket.destroy();
    }
    await until(t, 0, 0);
  });

  it('counts a large response in the large-body slots: beyond them 429 naming the limit; small reads go by', async () => {
    gated.close();
    const a = await connect(port);
    try {
      rawGet(a, `Binary/${bigId}?_format=json`);
      await received(a, '"data":"');
      expect(t.app.largeBodies.state()).toEqual({ running: 1, waiting: 0 });
      // Another large read, JSON or raw: no slot, no room to wait.
      for (const url of [`Binary/${bigId}?_format=json`, `Binary/${bigId}`, `Binary/${bigId}/_history/1`]) {
        const busy = await get(url);
        expect(busy.headers['retry-after'], url).toBe('2');
        expect(outcome(busy)).toMatchObject({ status: 429, code: 'throttled' });
        expect(outcome(busy).text).toMatch(/Too many large requests at once/);
        expect(outcome(busy).text).toMatch(/1 at a time/);
      }
      // Small reads, of this project and of another, are not held up.
      const small = await get(`Binary/${smallId}?_format=json`);
      expect(Buffer.from((small.json() as { data: string }).data, 'base64').toString()).toBe('small');
      expect((await get(`Binary/${smallId}`)).body).toBe('small');
      expect((await get(`Patient/${patientId}`, otherToken)).statusCode).toBe(200);
      // A 304 sends nothing: no slot needed.
      const notModified = await t.request({
        method: 'GET',
        url: `${t.fhir}/Binary/${bigId}`,
        token,
        headers: { 'if-none-match': 'W/"1"' },
      });
      expect(notModified.statusCode).toBe(304);
      gated.open();
      expect((await bodyOf(a)).head).toMatch(/^HTTP\/1\.1 200/);
    } finally {
      gated.open();
      a.socket.destroy();
    }
    await until(t, 0, 0);
    expect((await get(`Binary/${bigId}`)).rawPayload.equals(big)).toBe(true);
  });

  it('gives the slot back when the client goes away half-way through a large response', async () => {
    gated.close();
    const a = await connect(port);
    try {
      rawGet(a, `Binary/${bigId}`);
      await received(a, '\r\n\r\n');
      expect(t.app.largeBodies.state().running).toBe(1);
      a.socket.destroy();
      await a.closed;
      await until(t, 0, 0);
    } finally {
      a.socket.destroy();
      gated.open();
    }
    const res = await get(`Binary/${bigId}?_format=json`);
    expect(Buffer.from((res.json() as { data: string }).data, 'base64').equals(big)).toBe(true);
  });

  it('inlines at most 4 MiB of base64 data in a Bundle; an entry beyond answers 422 naming the limit', async () => {
    const two = randomBytes(2 * 1024 * 1024);
    const first = await upload(two);
    const second = await upload(two);
    const bundle = (type: string, ids: string[]) => ({
      resourceType: 'Bundle',
      type,
      entry: ids.map((id) => ({ request: { method: 'GET', url: `Binary/${id}` } })),
    });
    const batch = await t.request({
      method: 'POST',
      url: t.fhir,
      token,
      payload: bundle('batch', [first, smallId, second]),
    });
    expect(batch.statusCode, batch.body).toBe(200);
    const entries = (
      batch.json() as {
        entry: { response: { status: string; outcome?: unknown }; resource?: { data?: string } }[];
      }
    ).entry;
    expect(entries.map((e) => e.response.status)).toEqual(['200 OK', '200 OK', '422 Unprocessable Entity']);
    expect(Buffer.from(entries[0]?.resource?.data ?? '', 'base64').equals(two)).toBe(true);
    expect(Buffer.from(entries[1]?.resource?.data ?? '', 'base64').toString()).toBe('small');
    const refused = outcome(entries[2]?.response as { status: string; outcome?: unknown });
    expect(refused.code).toBe('too-costly');
    expect(refused.text).toContain(`Binary/${second}`);
    expect(refused.text).toContain('4194304');
    const transaction = await t.request({
      method: 'POST',
      url: t.fhir,
      token,
      payload: bundle('transaction', [first, second]),
    });
    expect(outcome(transaction)).toMatchObject({ status: 422, code: 'too-costly' });
    // Each one alone fits.
    const alone = await t.request({ method: 'POST', url: t.fhir, token, payload: bundle('batch', [second]) });
    expect((alone.json() as { entry: { response: { status: string } }[] }).entry[0]?.response.status).toBe(
      '200 OK',
    );
  });

  it('PATCH works on a Binary of at most 3 MiB; beyond, 422 naming the limit (PUT replaces it)', async () => {
    const over = await upload(randomBytes(3 * 1024 * 1024 + 1));
    const patch = (id: string) =>
      t.request({
        method: 'PATCH',
        url: `${t.fhir}/Binary/${id}`,
        token,
        headers: { 'content-type': 'application/json-patch+json' },
        payload: JSON.stringify([{ op: 'replace', path: '/contentType', value: 'image/png' }]),
      });
    const refused = await patch(over);
    expect(outcome(refused)).toMatchObject({ status: 422, code: 'too-costly' });
    expect(outcome(refused).text).toContain('3145728');
    expect(outcome(refused).text).toContain('PUT');
    const patched = await patch(bigId);
    expect(patched.statusCode, patched.body).toBe(200);
    const now = await get(`Binary/${bigId}`);
    expect([now.headers['content-type'], now.rawPayload.equals(big)]).toEqual(['image/png', true]);
  });
});
