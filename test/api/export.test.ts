// Bulk $export through HTTP (API.md §5): kick-off rules, round trips at system, Patient and Group level with
// _type, _since and _outputFormat, and project isolation of jobs and files.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { created, startTestApp, type TestApp } from '../support/app.js';
import { downloadOutput, jobIdOf, kickOff, startExport, waitForJob } from '../support/jobs.js';

describe.each(testDatabases())('bulk export on $name', (database) => {
  let t: TestApp;
  let dir: string;
  let p: { projectId: string; adminToken: string; memberToken: string };
  let other: { projectId: string; adminToken: string; memberToken: string };
  const patients: Record<string, unknown>[] = [];
  const observations: Record<string, unknown>[] = [];
  let orphanObs: Record<string, unknown>;
  let group: Record<string, unknown>;

  const post = (token: string, r: Record<string, unknown>): Promise<Record<string, unknown>> =>
    created(t, token, r);

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-export-'));
    t = await startTestApp(database, { dataDir: dir }, { jobs: { exportPageSize: 3 } });
    p = await t.newProject();
    other = await t.newProject();
    for (let i = 0; i < 5; i++) {
      const pt = await post(p.adminToken, { resourceType: 'Patient', name: [{ family: `P${i}` }] });
      patients.push(pt);
      observations.push(
        await post(p.adminToken, {
          resourceType: 'Observation',
          status: 'final',
          code: { text: 'x' },
          subject: { reference: `Patient/${pt.id as string}` },
        }),
      );
    }
    orphanObs = await post(p.adminToken, {
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'y' },
    });
    group = await post(p.adminToken, {
      resourceType: 'Group',
      type: 'person',
      actual: true,
      member: [0, 1].map((i) => ({ entity: { reference: `Patient/${patients[i]?.id as string}` } })),
    });
    await post(other.adminToken, { resourceType: 'Patient', name: [{ family: 'Other' }] });
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const ids = (rs: Record<string, unknown>[] | undefined): string[] =>
    (rs ?? []).map((r) => r.id as string).sort();

  it('needs Prefer: respond-async, a known _outputFormat and known types', async () => {
    const noPrefer = await t.request({ method: 'GET', url: `${t.fhir}/$export`, token: p.adminToken });
    expect(noPrefer.statusCode).toBe(400);
    expect(noPrefer.json().issue[0].code).toBe('invalid');
    expect((await kickOff(t, p.adminToken, '$export?_outputFormat=application/xml')).statusCode).toBe(400);
    expect((await kickOff(t, p.adminToken, '$export?_type=Nope')).statusCode).toBe(400);
  });

  it('exports the project (system level) and round-trips stored resources', async () => {
    const id = await startExport(t, p.adminToken, '_outputFormat=application/fhir%2Bndjson');
    const job = await waitForJob(t, id, p.adminToken);
    expect(job.status).toBe('completed');
    const files = await downloadOutput(t, job, p.adminToken);
    expect(ids(files.Patient)).toEqual(ids(patients));
    expect(ids(files.Observation)).toEqual(ids([...observations, orphanObs]));
    expect(ids(files.Group)).toEqual(ids([group]));
    // Byte-for-byte what a read returns.
    const read = await t.request({
      method: 'GET',
      url: `${t.fhir}/Patient/${patients[0]?.id as string}`,
      token: p.adminToken,
    });
    expect(files.Patient?.find((r) => r.id === patients[0]?.id)).toEqual(read.json());
  });

  it('exports with _type and _since, by POST with a Parameters body', async () => {
    const cut = (observations[2]?.meta as { lastUpdated: string }).lastUpdated;
    const id = jobIdOf(
      await kickOff(t, p.adminToken, '$export', {
        parameter: [
          { name: '_type', valueString: 'Observation,Patient' },
          { name: '_since', valueInstant: cut },
          { name: '_outputFormat', valueString: 'ndjson' },
        ],
      }),
    );
    const files = await downloadOutput(t, await waitForJob(t, id, p.adminToken), p.adminToken);
    expect(Object.keys(files).sort()).toEqual(['Observation', 'Patient']);
    const later = (rs: Record<string, unknown>[]) =>
      rs.filter((r) => (r.meta as { lastUpdated: string }).lastUpdated > cut);
    expect(ids(files.Observation)).toEqual(ids(later([...observations, orphanObs])));
    expect(ids(files.Patient)).toEqual(ids(later(patients)));
  });

  it('exports the patient compartment and a Group', async () => {
    const pid = await startExport(
      t,
      p.adminToken,
      '_type=Patient,Observation&_outputFormat=application/ndjson',
      'Patient/$export',
    );
    const pf = await downloadOutput(t, await waitForJob(t, pid, p.adminToken), p.adminToken);
    expect(ids(pf.Patient)).toEqual(ids(patients));
    expect(ids(pf.Observation)).toEqual(ids(observations));
    const gid = await startExport(t, p.adminToken, '', `Group/${group.id as string}/$export`);
    const gf = await downloadOutput(t, await waitForJob(t, gid, p.adminToken), p.adminToken);
    expect(ids(gf.Patient)).toEqual(ids(patients.slice(0, 2)));
    expect(ids(gf.Observation)).toEqual(ids(observations.slice(0, 2)));
    const missing = await kickOff(t, other.adminToken, `Group/${group.id as string}/$export`);
    expect(missing.statusCode).toBe(404);
  });

  it('keeps jobs and files to their project and starter', async () => {
    const id = await startExport(t, p.memberToken, '_type=Patient');
    const job = await waitForJob(t, id, p.memberToken);
    expect(job.status).toBe('completed');
    const url = (job.output?.parameter[0]?.part.find((x) => x.name === 'url')?.valueUri as string).replace(
      'http://cinder.test',
      '',
    );
    expect((await t.request({ method: 'GET', url, token: p.memberToken })).statusCode).toBe(200);
    expect((await t.request({ method: 'GET', url, token: p.adminToken })).statusCode).toBe(200);
    expect((await t.request({ method: 'GET', url, token: t.adminToken })).statusCode).toBe(200);
    for (const token of [other.adminToken, other.memberToken]) {
      const status = await t.request({ method: 'GET', url: `${t.fhir}/AsyncJob/${id}`, token });
      expect(status.statusCode).toBe(404);
      expect(status.json().issue[0].code).toBe('not-found');
      expect((await t.request({ method: 'GET', url, token })).statusCode).toBe(404);
      const cancel = await t.request({ method: 'POST', url: `${t.fhir}/AsyncJob/${id}/$cancel`, token });
      expect(cancel.statusCode).toBe(404);
    }
    // AsyncJob search follows the same rule: the starter sees their job, not the jobs others started.
    const adminJob = await startExport(t, p.adminToken, '_type=Patient');
    const ids = async (token: string): Promise<string[]> => {
      const res = await t.request({ method: 'GET', url: `${t.fhir}/AsyncJob?_count=100`, token });
      expect(res.statusCode, res.body).toBe(200);
      return ((res.json() as { entry?: { resource: { id: string } }[] }).entry ?? []).map(
        (e) => e.resource.id,
      );
    };
    const mine = await ids(p.memberToken);
    expect(mine).toContain(id);
    expect(mine).not.toContain(adminJob);
    expect(await ids(p.adminToken)).toEqual(expect.arrayContaining([id, adminJob]));
    expect(await ids(t.adminToken)).toEqual(expect.arrayContaining([id, adminJob]));
    for (const token of [other.adminToken, other.memberToken]) {
      const seen = await ids(token);
      expect(seen).not.toContain(id);
      expect(seen).not.toContain(adminJob);
    }
    // The other project's export never contains this project's resources.
    const oid = await startExport(t, other.adminToken, '_type=Patient');
    const of = await downloadOutput(t, await waitForJob(t, oid, other.adminToken), other.adminToken);
    expect(of.Patient?.map((r) => (r.name as { family: string }[])[0]?.family)).toEqual(['Other']);
  });
});
