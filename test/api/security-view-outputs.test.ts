// Big outputs of SQL on FHIR views must not stall the server nor answer 500 (issue 25 point 7): a view's rows are
// bounded per resource (a cross-product of sibling forEach / unionAll), a view's structure is bounded at validation,
// `$viewdefinition-run` never holds more than a bounded batch of rows, and the Parquet `$viewdefinition-export` is
// written in row groups as rows come, bounded in total (`viewExportMaxCells`), failing with an OperationOutcome that
// names the limit.
import { parquetMetadataAsync, parquetReadObjects } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dbFileStore } from '../../src/storage/db-files.js';
import type { Db } from '../../src/storage/db.js';
import { testDatabases } from '../support/db.js';
import { createEntry, postBundle, startTestApp, type TestApp } from '../support/app.js';
import { jobIdOf, kickOff, waitForJob } from '../support/jobs.js';

type Json = Record<string, unknown>;

const patientsWith = (count: number, names: number) =>
  Array.from({ length: count }, (_, i) =>
    createEntry({
      resourceType: 'Patient',
      name: Array.from({ length: names }, (_, n) => ({ family: `F${i}-${n}`, given: [`a${n}`, `b${n}`] })),
    }),
  );

/** `n` sibling selects, each iterating `path`: a cross-product of n factors per resource. */
const siblings = (n: number, path: string): Json => ({
  resourceType: 'ViewDefinition',
  name: 'crossed',
  resource: 'Patient',
  select: [
    { column: [{ name: 'id', path: 'getResourceKey()' }] },
    ...Array.from({ length: n }, (_, i) => ({ forEach: path, column: [{ name: `c${i}`, path: 'family' }] })),
  ],
});

/** A forEach over `outer` beside a select of `branches` unionAll branches, each iterating `path`. */
const unionBesideForEach = (branches: number, path: string, outer = 'name'): Json => ({
  resourceType: 'ViewDefinition',
  resource: 'Patient',
  select: [
    { forEach: outer, column: [{ name: 'f', path: '$this.toString()' }] },
    {
      unionAll: Array.from({ length: branches }, () => ({
        forEach: path,
        column: [{ name: 'g', path: '$this.toString()' }],
      })),
    },
    { forEach: 'name', column: [{ name: 'h', path: 'family' }] },
  ],
});

describe.each(testDatabases())('big view outputs on $name', (database) => {
  let t: TestApp;
  let db: Db;
  let runToken: string;
  let exportToken: string;

  beforeAll(async () => {
    // Job files in the database, as a server on PostgreSQL keeps them (the Parquet file's bytes are chunks there).
    db = await database.open();
    t = await startTestApp(
      database,
      { viewExportMaxCells: 300_000 },
      { db, files: dbFileStore(db), jobs: {} },
    );
    runToken = (await t.newProject()).adminToken;
    exportToken = (await t.newProject()).adminToken;
    // 60 Patients of 3 names (6 given names) for the runs, 40 of 2 names for the exports.
    for (const [token, entries] of [
      [runToken, patientsWith(60, 3)],
      [exportToken, patientsWith(40, 2)],
    ] as const) {
      const res = await postBundle(t, token, 'transaction', entries);
      expect(res.statusCode, res.body).toBe(200);
    }
  });
  afterAll(async () => {
    await t?.close();
    await db?.close();
  });

  const run = (view: Json, token = runToken) =>
    t.request({
      method: 'POST',
      url: `${t.fhir}/$viewdefinition-run`,
      token,
      payload: { resourceType: 'Parameters', parameter: [{ name: 'viewResource', resource: view }] },
    });
  const issue = (body: string) =>
    (JSON.parse(body) as { issue: { code: string; diagnostics?: string; details?: { text?: string } }[] })
      .issue[0];

  it('$viewdefinition-run: 50 unionAll beside a forEach (over 100,000 rows in one batch) answers its first 10,000 rows, not 500', async () => {
    // 3 names × 50 branches × 6 given names × 3 names = 2,700 rows per Patient, 162,000 over the 60.
    const res = await run(unionBesideForEach(50, 'name.given'));
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    expect(res.headers['x-truncated']).toBe('true');
    expect(res.body.trim().split('\n')).toHaveLength(10_000);
  });

  it('$viewdefinition-run: rows one resource would give beyond the limit → 422 too-costly naming the limit', async () => {
    // 50 unionAll branches over every descendant beside a forEach over every descendant: millions of rows a Patient.
    for (const view of [
      unionBesideForEach(50, 'descendants()', 'descendants()'),
      siblings(9, 'name.given'),
    ]) {
      const res = await run(view);
      expect(res.statusCode, res.body.slice(0, 300)).toBe(422);
      const i = issue(res.body);
      expect(i?.code).toBe('too-costly');
      expect(i?.details?.text).toMatch(/more than 10000 rows for one resource/);
    }
  });

  it('a view of more than 100 select and unionAll entries, or nested deeper than 10, is refused at validation (422)', async () => {
    const wide = unionBesideForEach(101, 'name');
    let deep: Json = { column: [{ name: 'x', path: 'id' }] };
    for (let i = 0; i < 11; i++) deep = { select: [deep] };
    const nested = { resourceType: 'ViewDefinition', resource: 'Patient', select: [deep] };
    for (const [view, limit] of [
      [wide, /at most 100 select and unionAll entries/],
      [nested, /nested deeper than 10 levels/],
    ] as const) {
      const res = await run(view);
      expect(res.statusCode, res.body.slice(0, 300)).toBe(422);
      const i = issue(res.body);
      expect(i?.code).toBe('too-costly');
      expect(i?.details?.text).toMatch(limit);
      // The export refuses it at kick-off, before any job exists.
      const started = await kickOff(t, exportToken, '$viewdefinition-export', {
        parameter: [{ name: 'view', part: [{ name: 'viewResource', resource: view }] }],
      });
      expect(started.statusCode).toBe(422);
    }
  });

  const exportParquet = async (view: Json): Promise<string> =>
    jobIdOf(
      await kickOff(t, exportToken, '$viewdefinition-export', {
        parameter: [
          { name: 'view', part: [{ name: 'viewResource', resource: view }] },
          { name: '_format', valueCode: 'parquet' },
        ],
      }),
    );

  it('Parquet export of 9 sibling forEach (20,480 rows) is written in row groups and reads back whole', async () => {
    const id = await exportParquet(siblings(9, 'name'));
    const job = await waitForJob(t, id, exportToken, 60_000);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    const url = job.output?.parameter[0]?.part.find((p) => p.name === 'url')?.valueUri as string;
    const res = await t.request({
      method: 'GET',
      url: url.replace('http://cinder.test', ''),
      token: exportToken,
    });
    expect(res.statusCode).toBe(200);
    const bytes = res.rawPayload;
    const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    const meta = await parquetMetadataAsync(file);
    expect(Number(meta.num_rows)).toBe(40 * 2 ** 9);
    // Written as rows came, a row group at a time: never the whole file's columns at once.
    expect(meta.row_groups.length).toBeGreaterThan(1);
    for (const g of meta.row_groups) expect(Number(g.num_rows)).toBeLessThanOrEqual(10_000);
    const rows = (await parquetReadObjects({ file })) as Json[];
    expect(rows).toHaveLength(40 * 2 ** 9);
    const first = rows.filter((r) => r.id === rows[0]?.id);
    expect(first).toHaveLength(512);
    expect(new Set(first.map((r) => JSON.stringify(r))).size).toBe(512);
  });

  it('an export beyond viewExportMaxCells fails with an error OperationOutcome naming the limit', async () => {
    // 40 × 1,024 rows × 11 columns = 450,560 cells > 300,000.
    const id = await exportParquet(siblings(10, 'name'));
    const job = await waitForJob(t, id, exportToken, 60_000);
    expect(job.status).toBe('failed');
    // The bulk status of a failed job: the IG's error answer with the OperationOutcome the job recorded.
    const res = await t.request({
      method: 'GET',
      url: `${t.fhir}/AsyncJob/${id}`,
      token: exportToken,
      headers: { accept: 'application/json' },
    });
    expect(res.statusCode).toBe(500);
    const i = issue(res.body);
    expect(i?.code).toBe('too-costly');
    expect(i?.details?.text ?? i?.diagnostics).toMatch(/more than 300000 cells .*\(viewExportMaxCells\)/);
  });
});
