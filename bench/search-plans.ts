// Searches that read every match for one page, before and after issue 30's plans: one-key `_sort` over a broad match,
// a broad `_has`, `:missing`, totals. Run in-process against a database of synthetic Observations filled here by SQL
// (the search index written as the server writes it), so the same data can be searched by two builds: run this file
// from a worktree of the old code with SP_REUSE=1 for the "before", from this one for the "after", interleaved.
//
//   SP_OBSERVATIONS=200000 npx tsx bench/search-plans.ts            # fills cinder_search_plans, then measures
//   SP_REUSE=1 npx tsx bench/search-plans.ts                        # measures the database a previous run left
//
// Environment: SP_DATABASE_URL (admin connection, default postgres://postgres@127.0.0.1:5432/postgres),
// SP_DATABASE_NAME (the database filled and searched, default cinder_search_plans), SP_OBSERVATIONS (default 200000;
// 50 per Patient; every 10,007th amended and without a subject: `:missing=true` and `:not` that match a few),
// SP_RUNS (default 5: the median is reported, with the first run's time), SP_COUNT_LIMIT (default 100000: the
// server's searchCountLimit). The `:missing`/`:not` rows (migration 028) need a database filled by a build that
// writes sp_missing; an older build measures it as it measures any other.
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { migrate } from '../src/storage/migrate.js';
import { openPostgres } from '../src/storage/postgres.js';
import type { Db, Queryable } from '../src/storage/db.js';
import { executeSearch } from '../src/fhir/search/execute.js';
import { writeIndex } from '../src/fhir/search/index-writer.js';
import { parseSearchRequest } from '../src/fhir/search/parse.js';
import type { Resource } from '../src/fhir/types.js';

const ADMIN_URL = process.env.SP_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const NAME = process.env.SP_DATABASE_NAME ?? 'cinder_search_plans';
const OBS = Number(process.env.SP_OBSERVATIONS ?? 200_000);
const RUNS = Number(process.env.SP_RUNS ?? 5);
const LIMIT = Number(process.env.SP_COUNT_LIMIT ?? 100_000);
const REUSE = process.env.SP_REUSE === '1';
const PER_PATIENT = 50;
const CODES = [
  '8302-2',
  '29463-7',
  '39156-5',
  '8867-4',
  '9279-1',
  '8310-5',
  '2339-0',
  '2093-3',
  '4548-4',
  '2085-9',
];
const scope = { projectId: 'bench' };

/** Every RARE-th Observation is amended and has no subject: `:missing=true` and `:not` that match a few. */
const RARE = 10_007;

function observation(i: number): Resource {
  const t = Date.UTC(2010, 0, 1) + ((i * 7919 * 60_000) % (15 * 365 * 86_400_000));
  const rare = i % RARE === 0;
  return {
    resourceType: 'Observation',
    id: `o${i}`,
    status: rare ? 'amended' : 'final',
    category: [
      {
        coding: [
          { system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' },
        ],
      },
    ],
    code: { coding: [{ system: 'http://loinc.org', code: CODES[i % CODES.length] as string }] },
    ...(rare ? {} : { subject: { reference: `Patient/p${Math.floor(i / PER_PATIENT)}` } }),
    effectiveDateTime: new Date(t).toISOString(),
    valueQuantity: { value: (i * 31) % 200, unit: 'cm', system: 'http://unitsofmeasure.org', code: 'cm' },
  };
}

async function insert(db: Db, resources: Resource[]): Promise<void> {
  await db.transaction(async (tx: Queryable) => {
    const res = await tx.query<{ rid: number; id: string; resource_type: string }>(
      `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
       SELECT x.resource_type, x.id, 'bench', 1, now(), false, x.content
       FROM jsonb_to_recordset($1::jsonb) AS x(resource_type text, id text, content jsonb) RETURNING rid, id, resource_type`,
      [JSON.stringify(resources.map((r) => ({ resource_type: r.resourceType, id: r.id, content: r })))],
    );
    const rid = new Map(res.rows.map((r) => [`${r.resource_type}/${r.id}`, Number(r.rid)]));
    await writeIndex(
      tx,
      resources.map((resource) => ({
        rid: rid.get(`${resource.resourceType}/${resource.id}`) as number,
        resource,
      })),
    );
  });
}

async function fill(url: string): Promise<void> {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${NAME} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${NAME}`);
  await admin.end();
  const db = await openPostgres(url, { max: 2 });
  try {
    await migrate(db);
    const patients = Math.ceil(OBS / PER_PATIENT);
    for (let k = 0; k < patients; k += 1000)
      await insert(
        db,
        Array.from({ length: Math.min(1000, patients - k) }, (_, i) => ({
          resourceType: 'Patient',
          id: `p${k + i}`,
          name: [{ family: `Fam${((k + i) * 7919) % 5000}` }],
          birthDate: `19${String(((k + i) * 13) % 100).padStart(2, '0')}-01-01`,
        })),
      );
    for (let k = 0; k < OBS; k += 1000) {
      await insert(
        db,
        Array.from({ length: Math.min(1000, OBS - k) }, (_, i) => observation(k + i)),
      );
      if (k % 50_000 === 0) console.error(`filled ${k} Observations`);
    }
    await db.query('VACUUM ANALYZE');
  } finally {
    await db.close();
  }
}

const QUERIES: [string, Record<string, string>][] = [
  ['Observation', { _sort: 'date', _count: '10' }],
  ['Observation', { _sort: '-date', _count: '10' }],
  ['Observation', { _sort: '-value-quantity', _count: '10' }],
  ['Observation', { _sort: '-date', code: 'http://loinc.org|8302-2', _count: '10' }],
  ['Observation', { _sort: '-date', subject: 'Patient/p1234', _count: '10' }],
  ['Patient', { _sort: 'family', _count: '10' }],
  ['Patient', { _sort: '-birthdate', _count: '10' }],
  ['Patient', { '_has:Observation:subject:code': 'http://loinc.org|8302-2', _count: '10' }],
  ['Observation', { 'subject:missing': 'true', _count: '10' }],
  ['Observation', { 'value-string:missing': 'false', _count: '10' }],
  ['Observation', { 'status:not': 'final', _count: '10' }],
  // :missing and :not from sp_missing (migration 028): matching nothing, a few, or nearly everything.
  ['Observation', { 'subject:missing': 'true', _count: '100' }],
  ['Observation', { 'patient:missing': 'true', _count: '10' }],
  ['Observation', { 'status:not': 'final', _count: '100' }],
  ['Observation', { 'status:not': 'final,amended', _count: '10' }],
  ['Observation', { 'status:not': 'amended', _count: '10' }],
  ['Observation', { 'code:not': 'http://loinc.org|8302-2', _count: '10' }],
  ['Observation', { 'value-string:missing': 'true', _count: '10' }],
  ['Observation', { 'date:missing': 'true', _summary: 'count' }],
  ['Observation', { 'subject:missing': 'true', _total: 'accurate', _count: '10' }],
  ['Observation', { 'status:not': 'final', _summary: 'count' }],
  ['Observation', { subject: 'Patient/p1234', 'value-string:missing': 'true', _count: '10' }],
  ['Observation', { subject: 'Patient/p1234', 'status:not': 'amended', _count: '10' }],
  ['Patient', { 'birthdate:missing': 'true', _count: '10' }],
  ['Observation', { _summary: 'count' }],
  ['Observation', { _total: 'estimate', _count: '1' }],
  ['Observation', { code: 'http://loinc.org|8302-2', _total: 'accurate', _count: '1' }],
  ['Observation', { subject: 'Patient/p1234', _summary: 'count' }],
];

async function main(): Promise<void> {
  const u = new URL(ADMIN_URL);
  u.pathname = `/${NAME}`;
  const url = u.toString();
  if (!REUSE) await fill(url);
  const db = await openPostgres(url, { max: 2 });
  const rows: Record<string, string | number>[] = [];
  try {
    for (const [type, query] of QUERIES) {
      const times: number[] = [];
      let outcome = '';
      for (let i = 0; i < RUNS; i++) {
        const started = performance.now();
        try {
          const r = await executeSearch(db, parseSearchRequest(type, query), scope, { countLimit: LIMIT });
          outcome = `${r.matches.length} matches${r.total !== undefined ? `, total ${r.total}` : ''}`;
        } catch (err) {
          outcome = (err as Error).message.slice(0, 60);
        }
        times.push(performance.now() - started);
      }
      const sorted = [...times].sort((a, b) => a - b);
      rows.push({
        search: `${type}?${new URLSearchParams(query).toString()}`,
        'median ms': Number((sorted[Math.floor(sorted.length / 2)] as number).toFixed(1)),
        'first ms': Number((times[0] as number).toFixed(1)),
        outcome,
      });
    }
  } finally {
    await db.close();
  }
  console.table(rows);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
