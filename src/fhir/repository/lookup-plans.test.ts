// What one resource or one Patient asks for is found through an index, whatever the number of other resources:
// - a vread and an instance history by the history's key (rid, version_id): by (resource_type, id), which
//   resource_history has no index for, they read every history row of the type (27 s at five million Observations
//   in bench/growth.ts);
// - the system's history by the (resource_type, last_updated) index, type by type: with every type in one
//   condition, every version was read and sorted (2.4 s);
// - a Group export's page by the reference index too, for a small group;
// - a compartment search (`Patient/<id>/Observation`) and `$everything` by the reference index (type, param,
//   `Patient/<id>`): by target type and id, they read every reference row (1.3 s) or every resource (3.4 s).
// The statements the repository runs are captured and explained; throughput is measured by the benchmarks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../../test/support/db.js';
import type { Db } from '../../storage/db.js';
import { recordQueries, tableAccess, type Recorded } from '../../../test/support/plans.js';
import { everythingOperation } from '../operations/everything.js';
import type { OperationInput } from '../operations/operation.js';
import { searchCompartment } from './compartment-search.js';
import type { ExportParams } from '../../jobs/kinds/export.js';
import { pageQuery } from '../../jobs/kinds/export-query.js';
import type { Resource } from '../types.js';
import { includeSql, searchSql } from '../search/sql.js';
import { parseSearchRequest } from '../search/parse.js';
import type { RawJson } from '../result.js';
import { systemContext } from './context.js';
import { commitCreates } from './create.js';
import { history } from './history.js';
import { prepareWrite } from './prepare.js';
import { vreadResource } from './read.js';
import { updateResource } from './update.js';

const PATIENTS = 3000;

/** A repository answer's body (a RawJson holding the stored text) as an object. */
const json = (body: unknown): Resource & { name?: unknown } =>
  JSON.parse((body as RawJson).text) as Resource & { name?: unknown };

describe.each(testDatabases())('lookups by index on $name', ({ open }) => {
  let db: Db;
  const ctx = systemContext('project-a', {
    clock: () => new Date(),
    newId: () => crypto.randomUUID(),
    fhirBase: 'http://localhost/fhir/R4',
  });
  const id = (i: number): string => `hp-${i}`;

  beforeAll(async () => {
    db = await open();
    const now = new Date();
    for (let from = 0; from < PATIENTS; from += 500) {
      const items = Array.from({ length: 500 }, (_, k) =>
        prepareWrite(
          ctx,
          { resourceType: 'Patient', name: [{ family: `Before${from + k}` }] } as Resource,
          id(from + k),
          1,
          now,
        ),
      );
      await db.transaction((tx) => commitCreates(tx, ctx, items));
      const observations = Array.from({ length: 1000 }, (_, k) =>
        prepareWrite(
          ctx,
          {
            resourceType: 'Observation',
            status: 'final',
            code: { coding: [{ system: 'http://loinc.org', code: k < 500 ? '8302-2' : '29463-7' }] },
            subject: { reference: `Patient/${id(from + (k % 500))}` },
          } as Resource,
          `obs-${2 * from + k}`,
          1,
          now,
        ),
      );
      await db.transaction((tx) => commitCreates(tx, ctx, observations));
    }
    for (const i of [7, 1500, 2999]) {
      await updateResource(db, ctx, 'Patient', id(i), {
        resourceType: 'Patient',
        id: id(i),
        name: [{ family: `After${i}` }],
      } as Resource);
    }
    // Every Observation's second version, written as writeVersion writes one (the first moves to resource_history):
    // the history then holds thousands of past versions, as a real database's does, and not only the three above.
    await db.query(
      `WITH prev AS (
         INSERT INTO resource_history (rid, resource_type, id, version_id, project_id, last_updated, deleted, content)
         SELECT rid, resource_type, id, version_id, project_id, last_updated - interval '1 hour', deleted, content
         FROM resources WHERE resource_type = 'Observation'
       )
       UPDATE resources SET version_id = version_id + 1 WHERE resource_type = 'Observation'`,
    );
    await db.query('ANALYZE');
  }, 120_000);
  afterAll(() => db?.close());

  it('a vread reads its version through the history key', async () => {
    const { q, seen } = recordQueries(db, /FROM resource_history/);
    const v1 = await vreadResource(q, ctx, 'Patient', id(1500), '1');
    const v2 = await vreadResource(q, ctx, 'Patient', id(1500), '2');
    expect(json(v1.body).name).toEqual([{ family: 'Before1500' }]);
    expect(json(v2.body).name).toEqual([{ family: 'After1500' }]);
    expect(v2.versionId).toBe('2');
    expect(seen.length).toBe(2);
    for (const s of seen) {
      const access = await tableAccess(db, s, 'resource_history');
      expect(access).toHaveLength(1);
      expect(access[0]).toMatch(/^Index (Only )?Scan resource_history_pkey$/);
      // The current version is the row of resources (resource_history holds only the past ones), by its key too.
      const current = await tableAccess(db, s, 'resources');
      expect(current.length).toBeGreaterThan(0);
      for (const a of current) expect(a).toMatch(/^Index (Only )?Scan resources_type_id$/);
    }
  });

  it('an instance history lists its versions, newest first, through the history key', async () => {
    const { q, seen } = recordQueries(db, /FROM resource_history/);
    const res = await history(
      q,
      ctx,
      'Patient',
      id(2999),
      {},
      'http://localhost/fhir/R4/Patient/hp-2999/_history',
    );
    const body = json(res.body) as unknown as {
      total: number;
      entry: { resource: Resource & { meta: { versionId: string } } }[];
    };
    expect(body.total).toBe(2);
    expect(body.entry.map((e) => e.resource.meta.versionId)).toEqual(['2', '1']);
    expect(body.entry[1]?.resource.name).toEqual([{ family: 'Before2999' }]);
    expect(seen.length).toBe(2); // the total and the page
    for (const s of seen) {
      const access = await tableAccess(db, s, 'resource_history');
      expect(access).toHaveLength(1);
      expect(access[0]).toMatch(/resource_history_pkey$/);
      // The current version from resources, by its key (rid).
      const current = await tableAccess(db, s, 'resources');
      expect(current).toHaveLength(1);
      expect(current[0]).toMatch(/resources_pkey$/);
    }
  });

  it("a type's history merges past versions and current rows, each read through its type index", async () => {
    const { q, seen } = recordQueries(db, /FROM resource_history/);
    const res = await history(
      q,
      ctx,
      'Patient',
      undefined,
      { _count: '5' },
      `${ctx.fhirBase}/Patient/_history`,
    );
    const body = json(res.body) as unknown as {
      entry: { resource: Resource; response: { etag: string } }[];
    };
    // The three updated Patients' current versions (resources), then the first version of hp-2999 (resource_history)
    // and of hp-2998 (never updated: its current row), by last_updated then rid, as before.
    expect(body.entry.map((e) => [e.resource.id, e.response.etag])).toEqual([
      [id(2999), 'W/"2"'],
      [id(1500), 'W/"2"'],
      [id(7), 'W/"2"'],
      [id(2999), 'W/"1"'],
      [id(2998), 'W/"1"'],
    ]);
    expect(seen.length).toBe(1);
    const past = await tableAccess(db, seen[0] as Recorded, 'resource_history');
    expect(past).toEqual([expect.stringMatching(/resource_history_type_updated$/)]);
    const current = await tableAccess(db, seen[0] as Recorded, 'resources');
    expect(current).toEqual([expect.stringMatching(/resources_type_(updated|project_updated)$/)]);
  });

  it("the system's history reads each type's newest versions through the type index, not every version", async () => {
    const { q, seen } = recordQueries(db, /FROM resource_history/);
    const res = await history(q, ctx, undefined, undefined, { _count: '5' }, `${ctx.fhirBase}/_history`);
    const body = json(res.body) as unknown as { total?: number; entry: { resource: Resource }[] };
    expect(body.total).toBeUndefined(); // more than one page: not counted unless asked
    expect(body.entry.map((e) => e.resource.id)).toEqual([id(2999), id(1500), id(7), 'obs-5999', 'obs-5998']);
    // Two statements: which types each table holds (skipping through the type indexes), then the page.
    expect(seen.length).toBe(2);
    const [held, page] = seen as [Recorded, Recorded];
    for (const table of ['resource_history', 'resources']) {
      const probe = await tableAccess(db, held, table);
      expect(probe.length).toBeGreaterThan(0);
      // An index led by resource_type: resource_history's type index, resources' type index or (type, id) key.
      for (const a of probe)
        expect(a).toMatch(/^Index (Only )?Scan (resource_history_type_updated|resources_type_\w+)$/);
    }
    const access = await tableAccess(db, page, 'resource_history');
    expect(access.length).toBeGreaterThan(1);
    expect(access).not.toContain('Seq Scan');
    // The current versions, from resources, type by type through its type index too.
    const current = await tableAccess(db, page, 'resources');
    expect(current.length).toBe(access.length);
    expect(current).not.toContain('Seq Scan');
  });

  it('a compartment search finds its resources through the reference index', async () => {
    const { q, seen } = recordQueries(db, /FROM sp_reference/);
    const res = await searchCompartment(
      q,
      ctx,
      'Patient',
      id(1234),
      'Observation',
      { code: 'http://loinc.org|8302-2' },
      `${ctx.fhirBase}/Patient/${id(1234)}/Observation`,
    );
    const body = json(res.body) as unknown as { entry: { resource: Resource & { subject: unknown } }[] };
    expect(body.entry.map((e) => e.resource.id)).toEqual(['obs-2234']);
    expect(body.entry[0]?.resource.subject).toEqual({ reference: `Patient/${id(1234)}` });
    expect(seen.length).toBeGreaterThan(0);
    for (const s of seen) {
      expect(await tableAccess(db, s, 'sp_reference')).not.toContain('Seq Scan');
      expect(await tableAccess(db, s, 'resources')).not.toContain('Seq Scan');
    }
  });

  it('a search by subject, and its _include, read the one row each reference keeps through the reference index', async () => {
    // Observation `subject` references to Patients are kept once, under `patient` (migration 025).
    const codes = await db.query<{ code: string; n: number }>(
      `SELECT code, count(*)::int AS n FROM sp_reference WHERE resource_type = 'Observation' GROUP BY code ORDER BY code`,
    );
    expect(codes.rows).toEqual([{ code: 'patient', n: 2 * PATIENTS }]);
    const scope = { projectId: 'project-a' };
    for (const code of ['subject', 'patient']) {
      const q = searchSql(parseSearchRequest('Observation', { [code]: `Patient/${id(1234)}` }), scope);
      const found = await db.query<{ id: string }>(q.text, q.values);
      expect(found.rows.map((r) => r.id).sort()).toEqual(['obs-2234', 'obs-2734']);
      expect(await tableAccess(db, { sql: q.text, params: q.values }, 'sp_reference')).toEqual([
        'Index Only Scan sp_reference_ref',
      ]);
    }
    const rids = (
      await db.query<{ rid: string }>(`SELECT rid FROM resources WHERE id = ANY($1::text[])`, [
        ['obs-2234', 'obs-5999'],
      ])
    ).rows.map((r) => Number(r.rid));
    const inc = includeSql({ sourceType: 'Observation', code: 'subject' }, rids, scope);
    const included = await db.query<{ id: string }>(inc.text, inc.values);
    expect(included.rows.map((r) => r.id).sort()).toEqual([id(1234), id(2999)]);
    const access = await tableAccess(db, { sql: inc.text, params: inc.values }, 'sp_reference');
    expect(access.length).toBeGreaterThan(0);
    expect(access).not.toContain('Seq Scan');
  });

  it("a Group export's page finds a small group's resources through the reference index", async () => {
    const params: ExportParams = {
      level: 'group',
      types: ['Observation', 'Patient'],
      since: null,
      projectId: 'project-a',
      patients: [id(321), id(2654)],
    };
    const obs = pageQuery(params, 'Observation', 0, 100, undefined);
    const found = await db.query<{ json: string }>(obs.text, obs.values);
    expect(found.rows.map((r) => (JSON.parse(r.json) as Resource).id).sort()).toEqual(
      ['obs-321', 'obs-821', 'obs-5154', 'obs-5654'].sort(),
    );
    expect(await tableAccess(db, { sql: obs.text, params: obs.values }, 'sp_reference')).toEqual([
      'Index Only Scan sp_reference_ref',
    ]);
    // The next page starts after the last row: nothing more here.
    const last = Math.max(
      ...(await db.query<{ rid: number }>(obs.text, obs.values)).rows.map((r) => Number(r.rid)),
    );
    const next = pageQuery(params, 'Observation', last, 100, undefined);
    expect((await db.query(next.text, next.values)).rows).toEqual([]);
    const patients = pageQuery(params, 'Patient', 0, 100, undefined);
    const members = await db.query<{ json: string }>(patients.text, patients.values);
    expect(members.rows.map((r) => (JSON.parse(r.json) as Resource).id).sort()).toEqual(
      [id(2654), id(321)].sort(),
    );
  });

  it('$everything finds the Patient and its compartment through the reference index', async () => {
    const { q, seen } = recordQueries(db, /FROM resources r/);
    const url = `${ctx.fhirBase}/Patient/${id(2222)}/$everything`;
    const res = await everythingOperation.run(
      { db: q } as unknown as Parameters<typeof everythingOperation.run>[0],
      {
        ctx,
        type: 'Patient',
        id: id(2222),
        request: { url, query: {} } as unknown as OperationInput['request'],
        warn: () => undefined,
      },
    );
    const body = json(res.body) as unknown as { total: number; entry: { resource: Resource }[] };
    expect(body.entry.map((e) => `${e.resource.resourceType}/${e.resource.id}`).sort()).toEqual([
      'Observation/obs-4222',
      'Observation/obs-4722',
      `Patient/${id(2222)}`,
    ]);
    expect(seen.length).toBe(1);
    const s = seen[0] as Recorded;
    expect(await tableAccess(db, s, 'sp_reference')).not.toContain('Seq Scan');
    expect(await tableAccess(db, s, 'resources')).not.toContain('Seq Scan');
  });
});
