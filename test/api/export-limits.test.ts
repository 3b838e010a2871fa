// Export quotas and retention through HTTP (issue 12 point 15, API.md §1 `maxActiveExportsPerUser` and
// `exportRetention`): one more kick-off than the quota answers 429 throttled with Retry-After whatever the login,
// instance or timing; files and `output` of ended export jobs are deleted after the retention (clock injected, one
// sweep run by hand); only files a job's current `output` lists are ever served.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { testDatabases } from '../support/db.js';
import {
  ADMIN_CLIENT_ID,
  ADMIN_CLIENT_SECRET,
  createEntry,
  postBundle,
  postResource,
  startTestApp,
  type TestApp,
} from '../support/app.js';
import { jobIdOf, kickOff, startExport, waitForJob, type AsyncJobBody } from '../support/jobs.js';

type Issue = { severity: string; code: string; details?: { text: string } };
const issue = (res: LightMyRequestResponse): Issue => (res.json() as { issue: Issue[] }).issue[0] as Issue;

/** A ClientApplication with a membership in the project; logging in with it again is the same login identity. */
async function newClient(
  t: TestApp,
  projectId: string,
  adminToken: string,
  admin = false,
): Promise<{ id: string; login(): Promise<string> }> {
  const secret = `secret-${randomUUID()}`;
  const client = await postResource(t, adminToken, {
    resourceType: 'ClientApplication',
    name: 'exporter',
    secret,
    meta: { project: projectId },
  });
  expect(client.statusCode, client.body).toBe(201);
  const id = client.json().id as string;
  const membership = await postResource(t, adminToken, {
    resourceType: 'ProjectMembership',
    meta: { project: projectId },
    project: { reference: `Project/${projectId}` },
    user: { reference: `ClientApplication/${id}` },
    profile: { reference: `ClientApplication/${id}` },
    admin,
  });
  expect(membership.statusCode, membership.body).toBe(201);
  return { id, login: () => t.token(id, secret) };
}

function expectThrottled(res: LightMyRequestResponse, max: number): void {
  expect(res.statusCode, res.body).toBe(429);
  expect(res.json().resourceType).toBe('OperationOutcome');
  expect(issue(res)).toMatchObject({ severity: 'error', code: 'throttled' });
  expect(issue(res).details?.text).toContain(`at most ${max}`);
  expect(issue(res).details?.text).toContain('maxActiveExportsPerUser');
  expect(String(res.headers['retry-after'])).toMatch(/^[1-9]\d*$/);
}

describe.each(testDatabases())('export quota on $name', (database) => {
  const MAX = 2;
  let t: TestApp;
  let dir: string;
  let p: { projectId: string; adminToken: string; memberToken: string };

  // No job runner: every export stays `accepted` (queued), so the quota is reached deterministically.
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-quota-'));
    t = await startTestApp(database, { dataDir: dir, maxActiveExportsPerUser: MAX });
    p = await t.newProject();
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** AsyncJobs the project's admin can find that were started by this client. */
  const jobsOf = async (clientId: string): Promise<number> => {
    const res = await t.request({ method: 'GET', url: `${t.fhir}/AsyncJob?_count=100`, token: p.adminToken });
    expect(res.statusCode, res.body).toBe(200);
    const entries = (res.json().entry ?? []) as { resource: { meta: { author?: { reference?: string } } } }[];
    return entries.filter((e) => e.resource.meta.author?.reference === `ClientApplication/${clientId}`)
      .length;
  };

  it('one kick-off beyond maxActiveExportsPerUser answers 429 throttled with Retry-After and creates no job', async () => {
    const c = await newClient(t, p.projectId, p.adminToken);
    const token = await c.login();
    await startExport(t, token, '_type=Patient');
    await startExport(t, token, '', 'Patient/$export');
    expectThrottled(await kickOff(t, token, '$export'), MAX);
    // Every export level and method counts against the same quota.
    expectThrottled(await kickOff(t, token, 'Patient/$export', { post: true }), MAX);
    expectThrottled(
      await kickOff(t, token, '$export', { parameter: [{ name: '_type', valueString: 'Patient' }] }),
      MAX,
    );
    expect(await jobsOf(c.id)).toBe(MAX);
  });

  it('logging in again gives no extra room; other logins keep their own quota', async () => {
    const c = await newClient(t, p.projectId, p.adminToken);
    for (let i = 0; i < MAX; i++) await startExport(t, await c.login(), '_type=Patient');
    const again = await c.login();
    expectThrottled(await kickOff(t, again, '$export'), MAX);
    // Someone else in the same project is not blocked by this client.
    const other = await newClient(t, p.projectId, p.adminToken);
    await startExport(t, await other.login(), '_type=Patient');
    expect(await jobsOf(c.id)).toBe(MAX);
  });

  it('counts only queued or running exports: a cancelled one frees its slot', async () => {
    const c = await newClient(t, p.projectId, p.adminToken);
    const token = await c.login();
    const first = await startExport(t, token, '_type=Patient');
    await startExport(t, token, '_type=Patient');
    expectThrottled(await kickOff(t, token, '$export'), MAX);
    const cancel = await t.request({ method: 'POST', url: `${t.fhir}/AsyncJob/${first}/$cancel`, token });
    expect(cancel.statusCode, cancel.body).toBe(200);
    await startExport(t, token, '_type=Patient');
    expectThrottled(await kickOff(t, token, '$export'), MAX);
    // An AsyncJob created by hand starts no work and does not count either.
    const handMade = await postResource(t, p.adminToken, {
      resourceType: 'AsyncJob',
      status: 'accepted',
      requestTime: new Date().toISOString(),
      request: 'x',
    });
    expect(handMade.statusCode, handMade.body).toBe(201);
  });

  it('super administrators have the same limit; their other jobs ($reindex) do not count', async () => {
    const admin = await t.token(ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET);
    for (let i = 0; i < MAX; i++) await startExport(t, admin, '_type=Patient');
    expectThrottled(await kickOff(t, admin, '$export?_type=Patient'), MAX);
    jobIdOf(await kickOff(t, admin, '$reindex', { post: true }));
  });

  it('concurrent kick-offs on two instances sharing the database never overshoot', async () => {
    const second = await startTestApp(database, { dataDir: dir, maxActiveExportsPerUser: MAX }, { db: t.db });
    try {
      const c = await newClient(t, p.projectId, p.adminToken);
      const tokens = await Promise.all(Array.from({ length: 4 }, () => c.login()));
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          kickOff(i % 2 === 0 ? t : second, tokens[i % tokens.length] as string, '$export?_type=Patient'),
        ),
      );
      const accepted = answers.filter((r) => r.statusCode === 202);
      expect(accepted).toHaveLength(MAX);
      for (const r of answers.filter((x) => x.statusCode !== 202)) expectThrottled(r, MAX);
      expect(await jobsOf(c.id)).toBe(MAX);
    } finally {
      await second.close();
    }
  });
});

describe.each(testDatabases())('export retention on $name', (database) => {
  const RETENTION = 3600;
  let t: TestApp;
  let dir: string;
  let offsetMs = 0;
  const clock = (): Date => new Date(Date.now() + offsetMs);
  let p: { projectId: string; adminToken: string; memberToken: string };
  // Moving the clock by the retention expires access tokens: the tests log in again after each move.
  let exporter: { id: string; login(): Promise<string> };
  let token: string;
  const moveClockTo = async (ms: number): Promise<void> => {
    offsetMs = ms;
    token = await exporter.login();
  };
  const filesOf = (id: string): string => path.join(dir, 'files', 'exports', id);
  const get = (url: string, as?: string): Promise<LightMyRequestResponse> =>
    t.request({ method: 'GET', url: url.replace('http://cinder.test', ''), token: as ?? token });
  const urlsOf = (job: AsyncJobBody): string[] =>
    (job.output?.parameter ?? []).map((x) => x.part.find((y) => y.name === 'url')?.valueUri as string);
  /** A completed export, checked downloadable; the clock then moves on from its end. */
  const completedExport = async (): Promise<{ id: string; urls: string[]; endedAt: number }> => {
    const id = await startExport(t, token, '_type=Patient,Observation');
    const job = await waitForJob(t, id, token);
    expect(job.status).toBe('completed');
    const urls = urlsOf(job);
    expect(urls).toHaveLength(2);
    for (const u of urls) expect((await get(u)).statusCode).toBe(200);
    return { id, urls, endedAt: offsetMs };
  };

  // `t` serves requests and sweeps but runs no job; `worker`, a second instance on the same database, runs them.
  let worker: TestApp | undefined;
  const startWorker = async (): Promise<TestApp> =>
    startTestApp(database, { dataDir: dir, exportRetention: RETENTION }, { db: t.db, clock, jobs: {} });

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-retention-'));
    t = await startTestApp(
      database,
      { dataDir: dir, exportRetention: RETENTION },
      { clock, jobs: { concurrency: 0 } },
    );
    worker = await startWorker();
    p = await t.newProject();
    exporter = await newClient(t, p.projectId, p.adminToken, true);
    token = await exporter.login();
    const res = await postBundle(t, token, 'transaction', [
      createEntry({ resourceType: 'Patient', name: [{ family: 'Kept' }] }, 'urn:uuid:p1'),
      createEntry({
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'x' },
        subject: { reference: 'urn:uuid:p1' },
      }),
    ]);
    expect(res.statusCode, res.body).toBe(200);
  });
  afterAll(async () => {
    await worker?.close();
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('deletes the files and the output exportRetention seconds after the job ended; the URLs then answer 404', async () => {
    const { id, urls, endedAt } = await completedExport();
    const before = (await get(`${t.fhir}/AsyncJob/${id}`)).json() as { meta: { versionId: string } };

    await moveClockTo(endedAt + (RETENTION - 60) * 1000);
    await t.retention?.sweepOnce();
    for (const u of urls) expect((await get(u)).statusCode).toBe(200);

    await moveClockTo(endedAt + (RETENTION + 1) * 1000);
    expect(await t.retention?.sweepOnce()).toBeGreaterThanOrEqual(1);
    for (const u of urls) {
      const res = await get(u);
      expect(res.statusCode).toBe(404);
      expect(issue(res)).toMatchObject({ severity: 'error', code: 'not-found' });
    }
    expect(fs.existsSync(filesOf(id))).toBe(false);
    const after = await get(`${t.fhir}/AsyncJob/${id}`);
    expect(after.statusCode).toBe(200);
    expect(after.json().status).toBe('completed');
    expect(after.json().output).toBeUndefined();
    // Older versions still name the URLs (history is not rewritten); they lead nowhere.
    const old = await get(`${t.fhir}/AsyncJob/${id}/_history/${before.meta.versionId}`);
    expect(old.statusCode).toBe(200);
    expect(old.json().output).toBeDefined();
    // Nothing is left to do: a later sweep changes nothing.
    await t.retention?.sweepOnce();
    expect((await get(`${t.fhir}/AsyncJob/${id}`)).json().meta.versionId).toBe(after.json().meta.versionId);
  });

  it('expires failed and cancelled exports too', async () => {
    // Queued while no worker runs: one is cancelled, the other's worker "died" three times already.
    await worker?.close();
    worker = undefined;
    const failing = await startExport(t, token, '_type=Patient');
    const cancelled = await startExport(t, token, '_type=Patient');
    const res = await t.request({
      method: 'POST',
      url: `${t.fhir}/AsyncJob/${cancelled}/$cancel`,
      token: token,
    });
    expect(res.statusCode, res.body).toBe(200);
    await t.db.query('UPDATE jobs SET attempts = 3 WHERE id = $1', [failing]);
    worker = await startWorker();
    const failed = await waitForJob(t, failing, token);
    expect(failed.status).toBe('failed');
    expect(failed.output).toBeDefined();
    // Wait until the worker has cleaned up after the cancelled job.
    for (let i = 0; ; i++) {
      const r = await t.db.query<{ c: boolean }>('SELECT cancel_requested AS c FROM jobs WHERE id = $1', [
        cancelled,
      ]);
      if (r.rows[0]?.c === false) break;
      if (i > 400) throw new Error('the cancelled job was not cleaned up');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    // Files left behind (e.g. by a crash at the wrong moment) go as well.
    for (const id of [failing, cancelled]) {
      fs.mkdirSync(filesOf(id), { recursive: true });
      fs.writeFileSync(path.join(filesOf(id), 'Patient.ndjson'), '{}\n');
    }

    await moveClockTo(offsetMs + (RETENTION + 1) * 1000);
    expect(await t.retention?.sweepOnce()).toBe(2);
    for (const id of [failing, cancelled]) expect(fs.existsSync(filesOf(id))).toBe(false);
    const job = await get(`${t.fhir}/AsyncJob/${failing}`);
    expect(job.json().status).toBe('failed');
    expect(job.json().output).toBeUndefined();
    expect((await get(`${t.fhir}/AsyncJob/${cancelled}`)).json().status).toBe('cancelled');
  });

  it('is safe when several instances sweep at once, and finds the work after a restart', async () => {
    const { id, urls, endedAt } = await completedExport();
    const versionAtEnd = Number((await get(`${t.fhir}/AsyncJob/${id}`)).json().meta.versionId);
    // A freshly started instance (nothing in memory) sweeps at the same time as the running one.
    const fresh = await startTestApp(
      database,
      { dataDir: dir, exportRetention: RETENTION },
      { db: t.db, clock, jobs: { concurrency: 0 } },
    );
    try {
      await moveClockTo(endedAt + (RETENTION + 1) * 1000);
      const counts = await Promise.all([
        t.retention?.sweepOnce(),
        fresh.retention?.sweepOnce(),
        t.retention?.sweepOnce(),
      ]);
      expect(counts.reduce((a, b) => (a ?? 0) + (b ?? 0), 0)).toBe(1);
    } finally {
      await fresh.close();
    }
    for (const u of urls) expect((await get(u)).statusCode).toBe(404);
    const job = (await get(`${t.fhir}/AsyncJob/${id}`)).json();
    expect(job.output).toBeUndefined();
    expect(Number(job.meta.versionId)).toBe(versionAtEnd + 1);
  });

  it('serves only files the job output lists, never a stray or tricky name', async () => {
    const { id, urls } = await completedExport();
    fs.writeFileSync(path.join(filesOf(id), 'Secret.ndjson'), '{"resourceType":"Patient","id":"x"}\n');
    fs.writeFileSync(path.join(filesOf(id), '.hidden.ndjson'), '{}\n');
    const base = `${t.fhir}/AsyncJob/${id}/output`;
    for (const file of [
      'Secret.ndjson',
      '.hidden.ndjson',
      '..%2F..%2Fsecret.ndjson',
      'Patient.ndjson%00',
      'Patient.csv',
    ]) {
      const res = await get(`${base}/${file}`);
      expect(res.statusCode, file).toBe(404);
      expect(issue(res), file).toMatchObject({ severity: 'error', code: 'not-found' });
    }
    for (const u of urls) expect((await get(u)).statusCode).toBe(200);
    // A job made by hand may list any URL: only its own directory could be meant, and nothing is there.
    const hand = await postResource(t, token, {
      resourceType: 'AsyncJob',
      status: 'completed',
      requestTime: new Date().toISOString(),
      request: 'x',
      output: {
        resourceType: 'Parameters',
        parameter: [{ name: 'output', part: [{ name: 'url', valueUri: urls[0] }] }],
      },
    });
    expect(hand.statusCode, hand.body).toBe(201);
    const handId = hand.json().id as string;
    expect((await get(`${t.fhir}/AsyncJob/${handId}/output/Patient.ndjson`)).statusCode).toBe(404);
  });
});
