// $cancel through HTTP: every row of the seed's table (§3, §7) and API.md §5, DELETE on the status URL, the
// cancel of a running export (it stops, leaves no files and no output), $reindex/$expunge access, and restart
// safety (a job whose worker died is resumed, or failed after too many attempts).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claim } from '../../src/jobs/queue.js';
import { testDatabases } from '../support/db.js';
import { startTestApp, type TestApp, createEntry, postBundle, postResource } from '../support/app.js';
import { downloadOutput, jobIdOf, kickOff, startExport, waitForJob } from '../support/jobs.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe.each(testDatabases())('AsyncJob cancel on $name', (database) => {
  let t: TestApp;
  let dir: string;
  let p: { projectId: string; adminToken: string; memberToken: string };
  let other: { projectId: string; adminToken: string; memberToken: string };
  const filesOf = (id: string): string => path.join(dir, 'files', 'exports', id);

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-cancel-'));
    t = await startTestApp(
      database,
      { dataDir: dir },
      { jobs: { exportPageSize: 2, afterChunk: () => sleep(100), leaseMs: 1500 } },
    );
    p = await t.newProject();
    other = await t.newProject();
    const res = await postBundle(
      t,
      p.adminToken,
      'transaction',
      Array.from({ length: 40 }, (_, i) =>
        createEntry({ resourceType: 'Patient', name: [{ family: `C${i}` }] }),
      ),
    );
    expect(res.statusCode, res.body).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const handMade = async (status: string): Promise<string> => {
    const res = await postResource(t, p.adminToken, {
      resourceType: 'AsyncJob',
      status,
      requestTime: new Date().toISOString(),
      request: 'x',
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };
  const cancel = (id: string, token = p.adminToken, headers: Record<string, string> = {}) =>
    t.request({ method: 'POST', url: `${t.fhir}/AsyncJob/${id}/$cancel`, token, headers });
  const issue = (res: { json(): unknown }) =>
    (res.json() as { issue: { severity: string; code: string; details: { text: string } }[] }).issue;

  it('accepted → 200 cancelled; cancelled → 200 unchanged', async () => {
    const id = await handMade('accepted');
    const first = await cancel(id, p.adminToken, { 'content-type': 'application/fhir+json' });
    expect(first.statusCode).toBe(200);
    expect(issue(first)).toHaveLength(1);
    expect(issue(first)[0]).toMatchObject({ severity: 'information', code: 'informational' });
    const read = await t.request({ method: 'GET', url: `${t.fhir}/AsyncJob/${id}`, token: p.adminToken });
    expect(read.statusCode).toBe(200);
    expect(read.json().status).toBe('cancelled');
    const again = await cancel(id, p.adminToken, { 'content-type': 'text/plain' });
    expect(again.statusCode).toBe(200);
    expect(issue(again)[0]).toMatchObject({ severity: 'information', code: 'informational' });
    const reread = await t.request({ method: 'GET', url: `${t.fhir}/AsyncJob/${id}`, token: p.adminToken });
    expect(reread.json().meta.versionId).toBe(read.json().meta.versionId);
  });

  it.each(['completed', 'failed'])('%s → 400 invalid naming the status', async (status) => {
    const id = await handMade(status);
    const res = await cancel(id);
    expect(res.statusCode).toBe(400);
    expect(issue(res)[0]).toEqual({
      severity: 'error',
      code: 'invalid',
      details: {
        text: `AsyncJob cannot be cancelled if status is not 'accepted', job had status '${status}'`,
      },
    });
    // The IG's delete request on an ended job deletes it (API.md §5): 202, then 404 to every reader and to $cancel.
    const del = await t.request({ method: 'DELETE', url: `${t.fhir}/AsyncJob/${id}`, token: p.adminToken });
    expect(del.statusCode).toBe(202);
    expect(issue(del)[0]).toMatchObject({ severity: 'information', code: 'informational' });
    const read = await t.request({ method: 'GET', url: `${t.fhir}/AsyncJob/${id}`, token: p.adminToken });
    expect(read.statusCode).toBe(404);
    expect((await cancel(id)).statusCode).toBe(404);
  });

  it('missing, other project or not the starter → 404 not-found', async () => {
    const id = await handMade('accepted');
    for (const res of [
      await cancel('no-such-job'),
      await cancel(id, other.adminToken),
      await cancel(id, p.memberToken),
    ]) {
      expect(res.statusCode).toBe(404);
      expect(issue(res)[0]).toEqual({ severity: 'error', code: 'not-found', details: { text: 'Not found' } });
    }
    // A super administrator may cancel any job; DELETE on the status URL is the same logic (202).
    const del = await t.request({ method: 'DELETE', url: `${t.fhir}/AsyncJob/${id}`, token: t.adminToken });
    expect(del.statusCode).toBe(202);
    expect(issue(del)[0]).toMatchObject({ severity: 'information', code: 'informational' });
  });

  it('stops a running export within 2 s, deletes its files and publishes no output', async () => {
    const id = await startExport(t, p.memberToken, '_type=Patient');
    // Wait until the worker has written part of the file.
    const until = Date.now() + 10_000;
    while (!fs.existsSync(path.join(filesOf(id), 'Patient.ndjson'))) {
      if (Date.now() > until) throw new Error('export did not start');
      await sleep(20);
    }
    const res = await cancel(id, p.memberToken);
    expect(res.statusCode).toBe(200);
    const cancelledAt = Date.now();
    while (fs.existsSync(filesOf(id))) {
      expect(Date.now() - cancelledAt).toBeLessThan(2000);
      await sleep(20);
    }
    await sleep(400);
    const job = await t.request({ method: 'GET', url: `${t.fhir}/AsyncJob/${id}`, token: p.memberToken });
    expect(job.statusCode).toBe(200);
    expect(job.json().status).toBe('cancelled');
    expect(job.json().output).toBeUndefined();
    expect(fs.existsSync(filesOf(id))).toBe(false);
    const file = await t.request({
      method: 'GET',
      url: `${t.fhir}/AsyncJob/${id}/output/Patient.ndjson`,
      token: p.memberToken,
    });
    expect(file.statusCode).toBe(404);
  });

  it('$reindex and $expunge: super administrators only, Prefer: respond-async, 202', async () => {
    for (const token of [p.adminToken, p.memberToken]) {
      expect((await kickOff(t, token, '$reindex', { post: true })).statusCode).toBe(403);
      const ex = await kickOff(t, token, `Project/${other.projectId}/$expunge?everything=true`, {
        post: true,
      });
      expect(ex.statusCode).toBe(403);
    }
    expect(
      (await t.request({ method: 'POST', url: `${t.fhir}/$reindex`, token: t.adminToken })).statusCode,
    ).toBe(400);
    const rid = jobIdOf(
      await kickOff(t, t.adminToken, '$reindex', { parameter: [{ name: '_type', valueString: 'Patient' }] }),
    );
    expect((await waitForJob(t, rid, t.adminToken)).status).toBe('completed');
    const search = await t.request({
      method: 'GET',
      url: `${t.fhir}/Patient?family=C1`,
      token: p.adminToken,
    });
    expect(search.json().entry.length).toBeGreaterThan(0);

    const victim = await t.newProject();
    await postResource(t, victim.adminToken, { resourceType: 'Patient', name: [{ family: 'Gone' }] });
    const eid = jobIdOf(
      await kickOff(t, t.adminToken, `Project/${victim.projectId}/$expunge?everything=true`, { post: true }),
    );
    expect((await waitForJob(t, eid, t.adminToken)).status).toBe('completed');
    const left = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM resources WHERE project_id = $1',
      [victim.projectId],
    );
    expect(left.rows[0]?.n).toBe(0);
    const hist = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM resource_history WHERE project_id = $1',
      [victim.projectId],
    );
    expect(hist.rows[0]?.n).toBe(0);
  });

  it('resumes a job whose worker died, and fails one that died too often', async () => {
    // A second app on the same database, without a runner, stands for the server that is killed.
    const dead = await startTestApp(database, { dataDir: dir }, { db: t.db });
    try {
      const id = await startExport(dead, p.adminToken, '_type=Patient');
      const failing = await startExport(dead, p.adminToken, '_type=Patient');
      // The killed worker had claimed both (short leases) and written a partial file; they expire unfinished.
      await t.db.query(
        "UPDATE jobs SET lease_owner = 'dead', lease_until = now() + interval '300 milliseconds' WHERE id IN ($1, $2)",
        [id, failing],
      );
      await t.db.query('UPDATE jobs SET attempts = 3 WHERE id = $1', [failing]);
      fs.mkdirSync(filesOf(id), { recursive: true });
      fs.writeFileSync(path.join(filesOf(id), 'Patient.ndjson'), '{"garbage": true}\n');
      expect(await claim(t.db, 'someone', 1000)).toBeUndefined();
      const done = await waitForJob(t, id, p.adminToken);
      expect(done.status).toBe('completed');
      const files = await downloadOutput(t, done, p.adminToken);
      expect(files.Patient).toHaveLength(40);
      const failed = await waitForJob(t, failing, p.adminToken);
      expect(failed.status).toBe('failed');
      expect(failed.output).toBeDefined();
    } finally {
      await dead.close();
    }
  });
});
