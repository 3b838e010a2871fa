// The Bulk Data IG's status, delete and file requests at the seed's AsyncJob URL (API.md §5,
// https://hl7.org/fhir/uv/bulkdata/export.html#bulk-data-status-request): `Accept: application/json` gets the IG's
// answers (202 with X-Progress and Retry-After, the complete-status manifest, an error OperationOutcome, 404 once
// cancelled or deleted) while FHIR clients keep getting the AsyncJob; DELETE cancels a running job and deletes an
// ended one with its files; downloads are gzip-compressed on request; and with PostgreSQL two instances serve
// each other's jobs and files without a shared directory.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/storage/db.js';
import { dbFileStore } from '../../src/storage/db-files.js';
import { testDatabases } from '../support/db.js';
import { createEntry, postBundle, postResource, startTestApp, type TestApp } from '../support/app.js';
import { jobIdOf } from '../support/jobs.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const IG = { accept: 'application/json' };
const KICK_OFF = { prefer: 'respond-async', accept: 'application/fhir+json' };

interface Manifest {
  transactionTime: string;
  request: string;
  requiresAccessToken: boolean;
  output: { type: string; url: string; count?: number }[];
  error: { type: string; url: string }[];
}

const local = (url: string): string => url.replace('http://cinder.test', '');

/** Polls the IG status until it is no longer 202; returns the final answer. */
async function pollIg(t: TestApp, id: string, token: string) {
  const until = Date.now() + 30_000;
  for (;;) {
    const res = await t.request({ method: 'GET', url: `${t.fhir}/AsyncJob/${id}`, token, headers: IG });
    if (res.statusCode !== 202) return res;
    expect(res.headers['x-progress']).toBeTruthy();
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(res.body).toBe('');
    if (Date.now() > until) throw new Error(`job ${id} still running`);
    await sleep(50);
  }
}

async function seed(t: TestApp, token: string, n: number): Promise<void> {
  const res = await postBundle(
    t,
    token,
    'transaction',
    Array.from({ length: n }, (_, i) =>
      createEntry({ resourceType: 'Patient', name: [{ family: `S${i}` }] }),
    ),
  );
  expect(res.statusCode, res.body).toBe(200);
}

describe.each(testDatabases())('Bulk Data status requests on $name', (database) => {
  let t: TestApp;
  let dir: string;
  let p: { projectId: string; adminToken: string; memberToken: string };
  let other: { adminToken: string };
  let slow = false;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-bulk-status-'));
    t = await startTestApp(
      database,
      { dataDir: dir },
      { jobs: { exportPageSize: 3, afterChunk: async () => (slow ? sleep(150) : undefined) } },
    );
    p = await t.newProject();
    other = await t.newProject();
    await seed(t, p.adminToken, 12);
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const kickOff = async (query = '_type=Patient'): Promise<string> =>
    jobIdOf(
      await t.request({
        method: 'GET',
        url: `${t.fhir}/$export?${query}`,
        token: p.memberToken,
        headers: KICK_OFF,
      }),
    );
  const status = (id: string, headers: Record<string, string>, token = p.memberToken) =>
    t.request({ method: 'GET', url: `${t.fhir}/AsyncJob/${id}`, token, headers });

  it('answers the IG manifest to application/json and the AsyncJob to FHIR clients', async () => {
    const id = await kickOff();
    const done = await pollIg(t, id, p.memberToken);
    expect(done.statusCode, done.body).toBe(200);
    expect(done.headers['content-type']).toMatch(/^application\/json/);
    const m = done.json() as Manifest;
    expect(m.requiresAccessToken).toBe(true);
    expect(m.request).toBe('http://cinder.test/fhir/R4/$export?_type=Patient');
    expect(Date.parse(m.transactionTime)).not.toBeNaN();
    expect(m.error).toEqual([]);
    expect(m.output.map((o) => o.type)).toEqual(['Patient']);
    const file = await t.request({
      method: 'GET',
      url: local(m.output[0]?.url as string),
      token: p.memberToken,
    });
    expect(file.statusCode).toBe(200);
    expect(file.headers['content-type']).toMatch(/^application\/fhir\+ndjson/);
    expect(file.body.trim().split('\n')).toHaveLength(12);

    // Without Accept, with */* or with FHIR JSON: the AsyncJob resource, as before.
    const asFhir: Record<string, string>[] = [
      {},
      { accept: '*/*' },
      { accept: 'application/fhir+json, application/json' },
    ];
    for (const headers of asFhir) {
      const res = await status(id, headers);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ resourceType: 'AsyncJob', status: 'completed' });
    }
    // Another project's admin learns nothing in either mode.
    expect((await status(id, IG, other.adminToken)).statusCode).toBe(404);
    expect((await status(id, {}, other.adminToken)).statusCode).toBe(404);
  });

  it('completes an export that found nothing with an empty manifest', async () => {
    const id = await kickOff('_type=DocumentReference');
    const done = await pollIg(t, id, p.memberToken);
    expect(done.statusCode, done.body).toBe(200);
    expect(done.json()).toMatchObject({ output: [], error: [], requiresAccessToken: true });
    expect((await status(id, {})).json()).toMatchObject({ status: 'completed' });
  });

  it('compresses a download with gzip when the client accepts it', async () => {
    const id = await kickOff();
    const m = (await pollIg(t, id, p.memberToken)).json() as Manifest;
    const url = local(m.output[0]?.url as string);
    const plain = await t.request({ method: 'GET', url, token: p.memberToken });
    const zipped = await t.request({
      method: 'GET',
      url,
      token: p.memberToken,
      headers: { 'accept-encoding': 'gzip, deflate' },
    });
    expect(zipped.statusCode).toBe(200);
    expect(zipped.headers['content-encoding']).toBe('gzip');
    expect(zipped.headers['content-type']).toMatch(/^application\/fhir\+ndjson/);
    expect(gunzipSync(zipped.rawPayload).toString('utf8')).toBe(plain.body);
    expect(plain.headers['content-encoding']).toBeUndefined();
    const refused = await t.request({
      method: 'GET',
      url,
      token: p.memberToken,
      headers: { 'accept-encoding': 'gzip;q=0, identity' },
    });
    expect(refused.headers['content-encoding']).toBeUndefined();
  });

  it('DELETE on an ended job deletes it and its files: status and files answer 404', async () => {
    const id = await kickOff();
    const m = (await pollIg(t, id, p.memberToken)).json() as Manifest;
    const url = local(m.output[0]?.url as string);
    const del = await t.request({ method: 'DELETE', url: `${t.fhir}/AsyncJob/${id}`, token: p.memberToken });
    expect(del.statusCode, del.body).toBe(202);
    expect((await status(id, IG)).statusCode).toBe(404);
    expect((await status(id, {})).statusCode).toBe(404);
    expect((await t.request({ method: 'GET', url, token: p.memberToken })).statusCode).toBe(404);
    expect(fs.existsSync(path.join(dir, 'files', 'exports', id))).toBe(false);
    // Deleting again, or someone else's job: 404.
    const again = await t.request({
      method: 'DELETE',
      url: `${t.fhir}/AsyncJob/${id}`,
      token: p.memberToken,
    });
    expect(again.statusCode).toBe(404);
  });

  it('DELETE on a running job cancels and deletes it: status, $cancel and a second DELETE answer 404', async () => {
    slow = true;
    try {
      const id = await kickOff();
      const running = await status(id, IG);
      expect(running.statusCode).toBe(202);
      const del = await t.request({
        method: 'DELETE',
        url: `${t.fhir}/AsyncJob/${id}`,
        token: other.adminToken,
      });
      expect(del.statusCode).toBe(404);
      const ok = await t.request({ method: 'DELETE', url: `${t.fhir}/AsyncJob/${id}`, token: p.memberToken });
      expect(ok.statusCode, ok.body).toBe(202);
      expect((await status(id, IG)).statusCode).toBe(404);
      expect((await status(id, {})).statusCode).toBe(404);
      const cancel = await t.request({
        method: 'POST',
        url: `${t.fhir}/AsyncJob/${id}/$cancel`,
        token: p.memberToken,
      });
      expect(cancel.statusCode).toBe(404);
      const again = await t.request({
        method: 'DELETE',
        url: `${t.fhir}/AsyncJob/${id}`,
        token: p.memberToken,
        headers: IG,
      });
      expect(again.statusCode).toBe(404);
      expect(again.json()).toMatchObject({ resourceType: 'OperationOutcome' });
      // Asked for application/json, the OperationOutcome is labelled so (the IG's "JSON format"; BDT parses only that).
      expect(again.headers['content-type']).toMatch(/^application\/json/);
      expect((await status(id, {})).headers['content-type']).toMatch(/^application\/fhir\+json/);
      // The worker stopped and left nothing behind.
      const until = Date.now() + 5000;
      while (fs.existsSync(path.join(dir, 'files', 'exports', id))) {
        expect(Date.now()).toBeLessThan(until);
        await sleep(50);
      }
    } finally {
      slow = false;
    }
  });

  it('a failed job answers the IG an error OperationOutcome', async () => {
    const made = await postResource(t, p.adminToken, {
      resourceType: 'AsyncJob',
      status: 'failed',
      requestTime: new Date().toISOString(),
      request: 'x',
    });
    expect(made.statusCode).toBe(201);
    const res = await status(made.json().id as string, IG, p.adminToken);
    expect(res.statusCode).toBe(500);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.json()).toMatchObject({ resourceType: 'OperationOutcome', issue: [{ severity: 'error' }] });
  });
});

const postgres = testDatabases().find((d) => d.name === 'postgres');

describe.runIf(postgres)('two instances on PostgreSQL, no shared directory', () => {
  let a: TestApp;
  let b: TestApp;
  let db: Db;
  const dirs: string[] = [];
  let token: string;

  beforeAll(async () => {
    const database = postgres as NonNullable<typeof postgres>;
    const dir = (): string => {
      const d = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-bulk-two-'));
      dirs.push(d);
      return d;
    };
    db = await database.open();
    const files = dbFileStore(db);
    // Only `a` runs jobs; `b` has its own empty data directory and reads the files from the database.
    a = await startTestApp(database, { dataDir: dir() }, { db, files, jobs: { exportPageSize: 2 } });
    b = await startTestApp(database, { dataDir: dir() }, { db, files });
    token = (await a.newProject()).adminToken;
    await seed(a, token, 7);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await db?.close();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('a job started on one instance is polled, downloaded and deleted on the other', async () => {
    const id = jobIdOf(
      await a.request({ method: 'GET', url: `${a.fhir}/$export?_type=Patient`, token, headers: KICK_OFF }),
    );
    const done = await pollIg(b, id, token);
    expect(done.statusCode, done.body).toBe(200);
    const url = local((done.json() as Manifest).output[0]?.url as string);
    const file = await b.request({ method: 'GET', url, token });
    expect(file.statusCode).toBe(200);
    expect(file.body.trim().split('\n')).toHaveLength(7);
    for (const d of dirs) expect(fs.readdirSync(d)).not.toContain('files');
    const del = await b.request({ method: 'DELETE', url: `${b.fhir}/AsyncJob/${id}`, token });
    expect(del.statusCode).toBe(202);
    expect((await a.request({ method: 'GET', url, token })).statusCode).toBe(404);
    const left = await a.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM file_chunks WHERE starts_with(key, $1)',
      [`exports/${id}/`],
    );
    expect(left.rows[0]?.n).toBe(0);
  });
});
