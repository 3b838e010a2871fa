// $viewdefinition-export through HTTP (issue 15 point 4, API.md §7): several views in one AsyncJob, NDJSON, CSV and
// Parquet files served like bulk export files with the rows $viewdefinition-run gives, X-Progress while running,
// `$cancel` mid-way (no output published, status cancelled) and DELETE, 422/400 at kick-off.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parquetReadObjects } from 'hyparquet';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobRow } from '../../src/jobs/queue.js';
import { viewExportKind, type ViewExportParams } from '../../src/jobs/kinds/view-export.js';
import { localFileStore } from '../../src/storage/files.js';
import { testDatabases } from '../support/db.js';
import { createEntry, postBundle, startTestApp, type TestApp } from '../support/app.js';
import { jobIdOf, kickOff, waitForJob, type AsyncJobBody } from '../support/jobs.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const patients = {
  resourceType: 'ViewDefinition',
  name: 'patients',
  resource: 'Patient',
  select: [
    {
      column: [
        { name: 'id', path: 'getResourceKey()', type: 'id' },
        { name: 'family', path: 'name.first().family', type: 'string' },
        { name: 'active', path: 'active', type: 'boolean' },
      ],
    },
  ],
};
const names = {
  resourceType: 'ViewDefinition',
  name: 'patient_names',
  resource: 'Patient',
  select: [
    { column: [{ name: 'id', path: 'getResourceKey()' }] },
    { forEach: 'name', column: [{ name: 'given', path: 'given', collection: true }] },
  ],
};
const observations = {
  resourceType: 'ViewDefinition',
  name: 'obs',
  resource: 'Observation',
  select: [
    {
      column: [
        { name: 'id', path: 'getResourceKey()' },
        { name: 'patient', path: 'subject.getReferenceKey(Patient)' },
        { name: 'value', path: 'value.ofType(Quantity).value', type: 'decimal' },
      ],
    },
  ],
};

describe.each(testDatabases())('viewdefinition-export on $name', (database) => {
  let t: TestApp;
  let token: string;
  let dir: string;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-views-'));
    // Small pages and a pause after every step, so that a job can be cancelled while it runs.
    t = await startTestApp(
      database,
      { dataDir: dir },
      { jobs: { exportPageSize: 5, afterChunk: () => sleep(30) } },
    );
    token = (await t.newProject()).adminToken;
    const entries = Array.from({ length: 12 }, (_, i) =>
      createEntry(
        {
          resourceType: 'Patient',
          active: i % 2 === 0,
          name: [{ family: `F${i}`, given: [`G${i}`, 'X'] }, { given: [`N${i}`] }],
        },
        `urn:uuid:00000000-0000-4000-8000-0000000000${String(i).padStart(2, '0')}`,
      ),
    );
    for (let i = 0; i < 12; i++)
      entries.push(
        createEntry({
          resourceType: 'Observation',
          status: 'final',
          code: { text: 'w' },
          subject: { reference: `urn:uuid:00000000-0000-4000-8000-0000000000${String(i).padStart(2, '0')}` },
          valueQuantity: { value: i + 0.5 },
        }),
      );
    const res = await postBundle(t, token, 'transaction', entries);
    expect(res.statusCode, res.body).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const viewPart = (view: Record<string, unknown>, name?: string) => ({
    name: 'view',
    part: [...(name ? [{ name: 'name', valueString: name }] : []), { name: 'viewResource', resource: view }],
  });
  const start = (parameter: Record<string, unknown>[]) =>
    kickOff(t, token, '$viewdefinition-export', { parameter });
  const run = async (view: Record<string, unknown>): Promise<Record<string, unknown>[]> => {
    const res = await t.request({
      method: 'POST',
      url: `${t.fhir}/$viewdefinition-run`,
      token,
      payload: { resourceType: 'Parameters', parameter: [{ name: 'viewResource', resource: view }] },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  };
  const files = (job: AsyncJobBody) =>
    (job.output?.parameter ?? []).map((p) => ({
      type: p.part.find((x) => x.name === 'type')?.valueCode,
      name: (p.part.find((x) => x.name === 'name') as { valueString?: string } | undefined)?.valueString,
      url: (p.part.find((x) => x.name === 'url')?.valueUri ?? '').replace('http://cinder.test', ''),
    }));
  const byId = (rows: Record<string, unknown>[]) =>
    [...rows].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));

  it('exports three views as NDJSON with the rows $viewdefinition-run gives', async () => {
    const id = jobIdOf(await start([viewPart(patients), viewPart(names), viewPart(observations)]));
    const job = await waitForJob(t, id, token);
    expect(job.status).toBe('completed');
    const out = files(job);
    expect(out.map((f) => [f.type, f.name])).toEqual([
      ['Patient', 'patients'],
      ['Patient', 'patient_names'],
      ['Observation', 'obs'],
    ]);
    for (const [i, view] of [patients, names, observations].entries()) {
      const res = await t.request({ method: 'GET', url: out[i]?.url as string, token });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('application/x-ndjson');
      const rows = res.body
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(byId(rows)).toEqual(byId(await run(view)));
    }
    // The bulk status manifest lists them too.
    const manifest = await t.request({
      method: 'GET',
      url: `${t.fhir}/AsyncJob/${id}`,
      token,
      headers: { accept: 'application/json' },
    });
    expect(manifest.json().output.map((o: { count: number; name: string }) => [o.name, o.count])).toEqual([
      ['patients', 12],
      ['patient_names', 24],
      ['obs', 12],
    ]);
  });

  it('exports CSV and Parquet files', async () => {
    const csvJob = await waitForJob(
      t,
      jobIdOf(await start([viewPart(patients, 'pts'), { name: '_format', valueCode: 'csv' }])),
      token,
    );
    const csv = await t.request({ method: 'GET', url: files(csvJob)[0]?.url as string, token });
    expect(csv.headers['content-type']).toContain('text/csv');
    const lines = csv.body.trim().split('\r\n');
    expect(lines[0]).toBe('id,family,active');
    expect(lines).toHaveLength(13);
    const pq = await waitForJob(
      t,
      jobIdOf(await start([viewPart(patients), viewPart(names), { name: '_format', valueCode: 'parquet' }])),
      token,
    );
    expect(pq.status).toBe('completed');
    for (const [i, view] of [patients, names].entries()) {
      const res = await t.request({ method: 'GET', url: files(pq)[i]?.url as string, token });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('application/vnd.apache.parquet');
      const bytes = res.rawPayload;
      const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
      const rows = (await parquetReadObjects({ file: buffer })) as Record<string, unknown>[];
      expect(byId(rows)).toEqual(byId(await run(view)));
    }
  });

  it('cancels mid-way: status cancelled, no output published, files removed', async () => {
    const id = jobIdOf(await start([viewPart(patients), viewPart(names), viewPart(observations)]));
    // Wait until it has written something, then cancel.
    for (let i = 0; i < 100; i++) {
      const res = await t.request({ method: 'GET', url: `${t.fhir}/AsyncJob/${id}`, token });
      if (/Exported [1-9]/.test(String(res.headers['x-progress']))) break;
      await sleep(20);
    }
    const cancel = await t.request({ method: 'POST', url: `${t.fhir}/AsyncJob/${id}/$cancel`, token });
    expect(cancel.statusCode, cancel.body).toBe(200);
    const job = await waitForJob(t, id, token);
    expect(job.status).toBe('cancelled');
    expect(job.output).toBeUndefined();
    for (let i = 0; i < 50 && fs.existsSync(path.join(dir, 'files', 'exports', id)); i++) await sleep(50);
    expect(fs.existsSync(path.join(dir, 'files', 'exports', id))).toBe(false);
    const file = await t.request({
      method: 'GET',
      url: `${t.fhir}/AsyncJob/${id}/output/patients.ndjson`,
      token,
    });
    expect(file.statusCode).toBe(404);
  });

  it('resumes after a worker died mid-view: the files are what an uninterrupted run writes', async () => {
    const projectId = (await t.request({ method: 'GET', url: `${t.fhir}/Patient?_count=1`, token })).json()
      .entry[0].resource.meta.project as string;
    const files = localFileStore(path.join(dir, 'view-resume'));
    const env = {
      db: t.db,
      files,
      fhirBase: 'http://cinder.test/fhir/R4',
      clock: () => new Date(),
      newId: randomUUID,
    };
    const kind = viewExportKind({ pageSize: 4, pagesPerStep: 1 });
    const read = async (key: string): Promise<Buffer> => {
      const stream = await files.read(key);
      const chunks: Buffer[] = [];
      for await (const c of stream as AsyncIterable<Buffer>) chunks.push(c);
      return Buffer.concat(chunks);
    };
    for (const format of ['ndjson', 'parquet'] as const) {
      const params: ViewExportParams = {
        views: [
          { name: 'patients', type: 'Patient', view: patients },
          { name: 'obs', type: 'Observation', view: observations },
        ],
        format,
        header: true,
        data: { level: 'system', since: null, projectId },
      };
      const run = async (jobId: string, crashAfter?: number): Promise<Buffer[]> => {
        const job = { id: jobId, params } as unknown as JobRow;
        let state = await kind.start(env, job);
        for (let step = 1; ; step++) {
          const r = await kind.runStep(env, job, state);
          if (r.done) break;
          if (step === crashAfter) {
            // The worker wrote more after its checkpoint and died; another one resumes from the checkpoint.
            const name = format === 'parquet' ? 'patients.rows.ndjson' : 'patients.ndjson';
            await files.append(`exports/${jobId}/${name}`, '{"half a row":');
            await kind.resume(env, job, r.state);
          }
          state = r.state;
        }
        return [
          await read(`exports/${jobId}/patients.${format}`),
          await read(`exports/${jobId}/obs.${format}`),
        ];
      };
      const clean = await run(`clean-${format}`);
      expect(clean[0]?.length).toBeGreaterThan(0);
      for (const crashAfter of [1, 2, 4])
        expect(await run(`crash-${format}-${crashAfter}`, crashAfter)).toEqual(clean);
    }
  });

  it('refuses views that cannot be processed (422) and malformed requests (400)', async () => {
    const broken = { ...patients, select: [{ column: [{ name: 'x', path: 'name.(' }] }] };
    const res = await start([viewPart(patients), viewPart(broken, 'broken')]);
    expect(res.statusCode).toBe(422);
    expect(res.json().issue[0].code).toBe('processing');
    const cases: Record<string, unknown>[][] = [
      [],
      [viewPart(patients), viewPart(patients)],
      [viewPart(patients, 'bad name')],
      [viewPart(patients), { name: '_format', valueCode: 'xlsx' }],
      [{ name: 'view', part: [] }],
    ];
    for (const parameter of cases) {
      const r = await start(parameter);
      expect(r.statusCode, JSON.stringify(parameter)).toBe(400);
      expect(r.json().issue[0].code).toBe('invalid');
    }
    const sync = await t.request({
      method: 'POST',
      url: `${t.fhir}/$viewdefinition-export`,
      token,
      payload: { resourceType: 'Parameters', parameter: [viewPart(patients)] },
    });
    expect(sync.statusCode).toBe(400);
  });
});
