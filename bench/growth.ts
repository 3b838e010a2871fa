// Cost as data grows (issue 16 point 3): one PostgreSQL-backed server, Patients (and Synthea-like Observations) loaded
// through the FHIR API in steps, and after each step the same reads, searches and create measured with autocannon
// (10 connections, GROWTH_RUNS × GROWTH_DURATION s, medians), each with its ratio to /healthcheck in the same step.
// The last table compares every figure with the first size: indexed work should stay flat.
//
//   npm run build && npx tsx bench/growth.ts
//
// Environment (all optional):
//   GROWTH_SIZES         Patient counts to measure at (default 10000,100000,1000000)
//   GROWTH_OBS           Observations per Patient (default 50)
//   GROWTH_OBS_PATIENTS  only the first N Patients get Observations (default 100000: 5 million Observations; more
//                        takes hours to load on a small machine), so the Observation table stops growing there
//   GROWTH_DATABASE_URL  admin connection (default postgres://postgres@127.0.0.1:5432/postgres); the bench makes and
//                        drops its own database `cinder_growth`
//   GROWTH_RUNS, GROWTH_DURATION  rounds and seconds per measurement (default 3 × 5)
//   GROWTH_ANALYZE       1 (default): ANALYZE after each load step, as autovacuum would soon after; 0 leaves it
//   GROWTH_REUSE         1: measure the `cinder_growth` database a previous run left (migrated to this version by the
//                        server's start), loading nothing: the same data before and after a change
//   GROWTH_HOT_PATIENTS  Observation searches pick their subject among the first N Patients only (default: all with
//                        Observations): the same tables with a working set that fits in memory, to tell the cost of
//                        a table's size from the cost of reading a larger part of it from disk
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { parseSearchRequest } from '../src/fhir/search/parse.js';
import { searchSql, sortWalkSql } from '../src/fhir/search/sql.js';
import { families, makePatient } from './patients.js';
import { login, startServer, batch, quantityObservation, type QuantityCode } from './server.js';
import { storageReport } from './storage-size.js';

const SIZES = (process.env.GROWTH_SIZES ?? '10000,100000,1000000').split(',').map(Number);
const OBS = Number(process.env.GROWTH_OBS ?? 50);
const OBS_PATIENTS = Number(process.env.GROWTH_OBS_PATIENTS ?? 100_000);
const ADMIN_URL = process.env.GROWTH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const RUNS = Number(process.env.GROWTH_RUNS ?? 3);
const DURATION = Number(process.env.GROWTH_DURATION ?? 5);
const ANALYZE = process.env.GROWTH_ANALYZE !== '0';
const REUSE = process.env.GROWTH_REUSE === '1';
const HOT = Number(process.env.GROWTH_HOT_PATIENTS ?? Infinity);
const CONNECTIONS = 10;
const BATCH = 500;
const LOADERS = 4;

/** Synthea's most frequent vital-sign and lab codes: a realistic spread for `code=` searches. */
const CODES = [
  ['8302-2', 'Body Height', 'cm', 170],
  ['29463-7', 'Body Weight', 'kg', 75],
  ['39156-5', 'Body mass index', 'kg/m2', 25],
  ['8867-4', 'Heart rate', '/min', 70],
  ['9279-1', 'Respiratory rate', '/min', 15],
  ['8310-5', 'Body temperature', 'Cel', 37],
  ['2339-0', 'Glucose', 'mg/dL', 90],
  ['2093-3', 'Cholesterol', 'mg/dL', 190],
  ['2571-8', 'Triglycerides', 'mg/dL', 130],
  ['18262-6', 'LDL Cholesterol', 'mg/dL', 100],
  ['2085-9', 'HDL Cholesterol', 'mg/dL', 55],
  ['4548-4', 'Hemoglobin A1c', '%', 5.6],
  ['6299-2', 'Urea nitrogen', 'mg/dL', 14],
  ['38483-4', 'Creatinine', 'mg/dL', 1],
  ['2947-0', 'Sodium', 'mmol/L', 140],
  ['6298-4', 'Potassium', 'mmol/L', 4.2],
  ['2069-3', 'Chloride', 'mmol/L', 103],
  ['20565-8', 'Carbon dioxide', 'mmol/L', 25],
  ['49765-1', 'Calcium', 'mg/dL', 9.5],
  ['72514-3', 'Pain severity', '{score}', 2],
] as const;

function makeObservation(patientId: string, i: number, k: number): Record<string, unknown> {
  const day = new Date(Date.UTC(2010, 0, 1) + ((i * 37 + k * 113) % 5000) * 86_400_000).toISOString();
  return quantityObservation({
    patientId,
    coding: CODES[(i + k) % CODES.length] as QuantityCode,
    category: k % 2 ? 'laboratory' : 'vital-signs',
    effective: day,
    issued: day,
    factor: 0.8 + ((i * 13 + k) % 40) / 100,
  });
}

async function inParallel(n: number, count: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < count) await fn(next++);
    }),
  );
}

/** Loads Patients `from`..`to` (and their Observations, within GROWTH_OBS_PATIENTS), appending their ids. */
async function load(base: string, token: string, ids: string[], from: number, to: number): Promise<number> {
  const started = Date.now();
  let observations = 0;
  const chunks = Math.ceil((to - from) / BATCH);
  await inParallel(LOADERS, chunks, async (c) => {
    const first = from + c * BATCH;
    const patients = Array.from({ length: Math.min(BATCH, to - first) }, (_, k) => makePatient(first + k));
    const made = await batch(base, token, patients);
    made.forEach((id, k) => (ids[first + k] = id));
    const obs = made.flatMap((id, k) =>
      first + k < OBS_PATIENTS
        ? Array.from({ length: OBS }, (_, j) => makeObservation(id, first + k, j))
        : [],
    );
    for (let i = 0; i < obs.length; i += BATCH) await batch(base, token, obs.slice(i, i + BATCH));
    observations += obs.length;
  });
  const s = (Date.now() - started) / 1000;
  console.log(
    `loaded Patients ${from}..${to} and ${observations} Observations in ${s.toFixed(0)} s ` +
      `(${Math.round((to - from + observations) / s)} resources/s)`,
  );
  return observations;
}

type Options = Parameters<typeof autocannon>[0];
type Result = Awaited<ReturnType<typeof autocannon>>;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

interface Row {
  patients: number;
  observations: number;
  test: string;
  'req/s': number;
  'p50 ms': number;
  'p99 ms': number;
  'x health': string;
  errors: number;
}

function tests(base: string, token: string, ids: string[], obsIds: string[]): Map<string, Options> {
  const auth = { authorization: `Bearer ${token}` };
  const fams = families();
  let n = 0;
  const pick = <T>(xs: readonly T[]): T => xs[(n++ * 7919) % xs.length] as T;
  const get = (path: () => string): Options => ({
    url: base,
    headers: auth,
    requests: [{ method: 'GET', setupRequest: (r) => ({ ...r, path: `/fhir/R4/${path()}` }) }],
  });
  const withObs = ids.slice(0, Math.min(ids.length, OBS_PATIENTS, HOT));
  return new Map<string, Options>([
    ['healthcheck', { url: `${base}healthcheck` }],
    ['read Patient', get(() => `Patient/${pick(ids)}`)],
    ['read Observation', get(() => `Observation/${pick(obsIds)}`)],
    ['vread Observation', get(() => `Observation/${pick(obsIds)}/_history/1`)],
    ['history of an Observation', get(() => `Observation/${pick(obsIds)}/_history`)],
    ['Patient?identifier=', get(() => `Patient?identifier=MRN-${100000 + ((n++ * 7919) % ids.length)}`)],
    ['Patient?family=&_count=20', get(() => `Patient?family=${encodeURIComponent(pick(fams))}&_count=20`)],
    ['Observation?subject=&_count=20', get(() => `Observation?subject=Patient/${pick(withObs)}&_count=20`)],
    [
      'Observation?subject=&code=',
      get(() => `Observation?subject=Patient/${pick(withObs)}&code=http://loinc.org|${pick(CODES)[0]}`),
    ],
    [
      'Observation/$lastn?patient=&category=&max=3',
      get(() => `Observation/$lastn?patient=${pick(withObs)}&category=vital-signs&max=3`),
    ],
    [
      'Observation?code=&_count=20',
      get(() => `Observation?code=http://loinc.org|${pick(CODES)[0]}&_count=20`),
    ],
    ['Observation?_sort=-date&_count=20', get(() => `Observation?_sort=-date&_count=20`)],
    [
      'Observation?code=&_sort=-date&_count=20',
      get(() => `Observation?code=http://loinc.org|${pick(CODES)[0]}&_sort=-date&_count=20`),
    ],
    [
      'create Patient',
      {
        url: base,
        headers: { ...auth, 'content-type': 'application/fhir+json' },
        requests: [
          {
            method: 'POST',
            path: '/fhir/R4/Patient',
            setupRequest: (r) => ({ ...r, body: JSON.stringify(makePatient(10_000_000 + n++)) }),
          },
        ],
      },
    ],
  ]);
}

async function measure(all: Map<string, Options>): Promise<Map<string, Result[]>> {
  const out = new Map<string, Result[]>();
  for (let round = 0; round < RUNS; round++) {
    for (const [name, opts] of all) {
      const r = await autocannon({ ...opts, connections: CONNECTIONS, duration: DURATION });
      out.set(name, [...(out.get(name) ?? []), r]);
    }
  }
  return out;
}

interface ExplainJson {
  'Execution Time': number;
  'Planning Time': number;
  Plan: { 'Shared Hit Blocks'?: number; 'Shared Read Blocks'?: number; 'I/O Read Time'?: number };
}

/**
 * The database's own time for each search form (EXPLAIN ANALYZE of the SQL the server runs, 15 values each, median
 * execution and planning ms): the part of a search that grows with the data, apart from HTTP and the machine's load.
 * Also the pages it touched, how many of them were not in PostgreSQL's shared buffers, and the time spent reading
 * those: a plan that stays the same touches as many pages at every size; a search that reads more of them as the
 * data outgrows the memory slows down for that reason alone.
 */
async function dbTimes(url: string, ids: string[]): Promise<Record<string, string>> {
  // As Cinder's own sessions run (storage/postgres.ts): without parallel query. track_io_timing (superuser) times
  // the pages read from outside PostgreSQL's shared buffers: the operating system's cache or the disk.
  const client = new pg.Client({
    connectionString: url,
    options: '-c max_parallel_workers_per_gather=0 -c track_io_timing=on',
  });
  await client.connect();
  try {
    const project = (
      await client.query<{ project_id: string }>(
        `SELECT project_id FROM resources WHERE resource_type = 'Patient' LIMIT 1`,
      )
    ).rows[0]?.project_id as string;
    const withObs = ids.slice(0, Math.min(ids.length, OBS_PATIENTS, HOT));
    const forms: [string, string, (k: number) => Record<string, string>][] = [
      [
        'Patient?identifier=',
        'Patient',
        (k) => ({ identifier: `MRN-${100000 + ((k * 7919) % ids.length)}` }),
      ],
      [
        'Patient?family=&_count=20',
        'Patient',
        (k) => ({ family: families()[k % families().length] as string, _count: '20' }),
      ],
      [
        'Observation?subject=&_count=20',
        'Observation',
        (k) => ({ subject: `Patient/${withObs[(k * 7919) % withObs.length] as string}`, _count: '20' }),
      ],
      [
        'Observation?subject=&code=',
        'Observation',
        (k) => ({
          subject: `Patient/${withObs[(k * 7919) % withObs.length] as string}`,
          code: `http://loinc.org|${(CODES[k % CODES.length] as (typeof CODES)[number])[0]}`,
        }),
      ],
      [
        'Observation?code=&_count=20',
        'Observation',
        (k) => ({
          code: `http://loinc.org|${(CODES[k % CODES.length] as (typeof CODES)[number])[0]}`,
          _count: '20',
        }),
      ],
      ['Observation?_sort=-date&_count=20', 'Observation', () => ({ _sort: '-date', _count: '20' })],
      [
        'Observation?code=&_sort=-date&_count=20',
        'Observation',
        (k) => ({
          code: `http://loinc.org|${(CODES[k % CODES.length] as (typeof CODES)[number])[0]}`,
          _sort: '-date',
          _count: '20',
        }),
      ],
    ];
    const out: Record<string, string> = {};
    for (const [name, type, query] of forms) {
      const exec: number[] = [];
      const plan: number[] = [];
      const pages: number[] = [];
      const reads: number[] = [];
      const io: number[] = [];
      for (let k = 0; k < 15; k++) {
        // A one-key sort walks its parameter's index (sortWalkSql, as execute.ts runs it): its first segment.
        const req = parseSearchRequest(type, query(k));
        const q = sortWalkSql(req, { projectId: project })?.[0] ?? searchSql(req, { projectId: project });
        const r = await client.query<{ 'QUERY PLAN': ExplainJson[] }>(
          `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${q.text}`,
          q.values as unknown[],
        );
        const p = r.rows[0]?.['QUERY PLAN'][0];
        exec.push(p?.['Execution Time'] ?? NaN);
        plan.push(p?.['Planning Time'] ?? NaN);
        pages.push((p?.Plan['Shared Hit Blocks'] ?? 0) + (p?.Plan['Shared Read Blocks'] ?? 0));
        reads.push(p?.Plan['Shared Read Blocks'] ?? NaN);
        io.push(p?.Plan['I/O Read Time'] ?? NaN);
      }
      out[name] =
        `${median(exec).toFixed(2)} ms (+${median(plan).toFixed(2)} planning); ` +
        `${median(reads)} of ${median(pages)} pages read, ${median(io).toFixed(2)} ms`;
    }
    return out;
  } finally {
    await client.end();
  }
}

async function databaseSize(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const r = await client.query<{ size: string }>(
      'SELECT pg_size_pretty(pg_database_size(current_database())) AS size',
    );
    return r.rows[0]?.size ?? '?';
  } finally {
    await client.end();
  }
}

async function adminQuery(sql: string, db = 'postgres'): Promise<void> {
  const u = new URL(ADMIN_URL);
  u.pathname = `/${db}`;
  const client = new pg.Client({ connectionString: u.toString() });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** The Patient ids and Observation count of the database a previous run left, in load order. */
async function loaded(url: string): Promise<{ ids: string[]; observations: number }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const ids = (
      await client.query<{ id: string }>(
        `SELECT id FROM resources WHERE resource_type = 'Patient' AND NOT deleted ORDER BY rid`,
      )
    ).rows.map((r) => r.id);
    const obs = await client.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM resources WHERE resource_type = 'Observation' AND NOT deleted`,
    );
    return { ids, observations: obs.rows[0]?.n ?? 0 };
  } finally {
    await client.end();
  }
}

async function main(): Promise<void> {
  if (!REUSE) {
    await adminQuery('DROP DATABASE IF EXISTS cinder_growth WITH (FORCE)');
    await adminQuery('CREATE DATABASE cinder_growth');
  }
  const u = new URL(ADMIN_URL);
  u.pathname = '/cinder_growth';
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-growth-'));
  const stdout = fs.openSync('/dev/null', 'a');
  const server = await startServer(
    { DATABASE_URL: u.toString(), DATA_DIR: path.join(work, 'files') },
    work,
    { requestLog: 'errors' },
    { stdout },
  );
  const rows: Row[] = [];
  const dbRows: Record<string, unknown>[] = [];
  try {
    const token = await login(server.base);
    const previous = REUSE ? await loaded(u.toString()) : { ids: [], observations: 0 };
    const ids: string[] = previous.ids;
    let observations = previous.observations;
    let done = 0;
    for (const size of REUSE ? [ids.length] : SIZES) {
      if (!REUSE) observations += await load(server.base, token, ids, done, size);
      done = size;
      if (ANALYZE) await adminQuery('ANALYZE', 'cinder_growth');
      // Observation ids to read: those of a few Patients, found once through the API.
      const obsIds: string[] = [];
      for (const pid of ids.slice(0, 20)) {
        const res = await fetch(
          `${server.base}fhir/R4/Observation?subject=Patient/${pid}&_count=50&_elements=id`,
          {
            headers: { authorization: `Bearer ${token}` },
          },
        );
        const b = (await res.json()) as { entry?: { resource: { id: string } }[] };
        for (const e of b.entry ?? []) obsIds.push(e.resource.id);
      }
      const results = await measure(tests(server.base, token, ids, obsIds));
      const health = median((results.get('healthcheck') ?? []).map((r) => r.requests.average));
      for (const [test, runs] of results) {
        const rps = median(runs.map((r) => r.requests.average));
        rows.push({
          patients: size,
          observations,
          test,
          'req/s': Math.round(rps),
          'p50 ms': median(runs.map((r) => r.latency.p50)),
          'p99 ms': median(runs.map((r) => r.latency.p99)),
          'x health': (rps / health).toFixed(2),
          errors: runs.reduce((k, r) => k + r.non2xx + r.errors, 0),
        });
      }
      console.table(rows.filter((r) => r.patients === size));
      const times = await dbTimes(u.toString(), ids);
      dbRows.push({ patients: size, 'database size': await databaseSize(u.toString()), ...times });
      console.table([times]);
      // Bytes per resource per table of the database being grown (bench/storage-size.ts; ANALYZE ran above).
      console.log(await storageReport(u.toString(), 'none', `bytes per resource at ${size} Patients`));
    }
    console.log(`server peak RSS ${server.peakRssMb()} MB`);
  } finally {
    await server.stop();
    fs.closeSync(stdout);
    fs.rmSync(work, { recursive: true, force: true });
  }
  console.log(
    `\ngrowth on PostgreSQL: ${CONNECTIONS} connections, medians of ${RUNS} × ${DURATION} s per size, ` +
      `${os.cpus().length} CPUs, Node ${process.version}; ${OBS} Observations for each of the first ${OBS_PATIENTS} Patients`,
  );
  console.table(rows);
  console.log('database execution time per search (EXPLAIN ANALYZE, median of 15 values)');
  console.table(dbRows);
  // Flatness: each test's p50 and req/s at every size against the first size (a reused database has one size).
  if (REUSE) return;
  const first = SIZES[0] as number;
  const flat = rows
    .filter((r) => r.patients !== first)
    .map((r) => {
      const base = rows.find((b) => b.patients === first && b.test === r.test) as Row;
      return {
        test: r.test,
        patients: r.patients,
        'req/s vs first': (r['req/s'] / base['req/s']).toFixed(2),
        'p99 vs first': (r['p99 ms'] / Math.max(base['p99 ms'], 1)).toFixed(2),
      };
    });
  console.table(flat);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
