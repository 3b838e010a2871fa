// Observation/$lastn as a patient's record grows (issue 29, API.md §11): one PostgreSQL-backed server, one Patient for
// each size of LASTN_SIZES (default 10,100,1000,10000 vital-sign Observations each: LASTN_CODES LOINC codes in turn,
// default 10, dates spread over ten years), loaded through the FHIR API in batch Bundles of 1000 (4 clients). Then
// `$lastn?patient=&category=vital-signs&max=1`, `&max=3` and `?patient=&code=<one code>` for each Patient, with
// `GET Patient/<id>` and `/healthcheck` as baselines, each measured one request at a time on one kept-alive connection,
// after LASTN_WARMUP warm-up requests each: LASTN_ROUNDS rounds of LASTN_REQUESTS turns, a turn sending one request of
// every case in a shuffled order (so that a busy machine slows them alike): median and p95 latency, req/s, the ratio
// to the healthcheck, and the ratio of each size's median to the 10-Observation Patient's (flat: ≤ ~1.5×) and to the
// smallest Patient whose answer holds as many entries. Every answer is checked (status 200, entry count, and for
// `code=` the newest Observation). The codes are fewer than the smallest Patient's Observations so that `max=1` and
// `code=` answer the same number of entries at every size; `max=3` answers 3 per code from 100 on.
// Then the database's side of `max=1` and `max=3` per Patient: execution and planning time of $lastn's two queries
// (EXPLAIN ANALYZE, medians of 5) and the buffers they touch.
//
//   npm run build && npx tsx bench/lastn.ts          (or as part of `npm run bench`; BENCH_LASTN=0 skips)
//
// Environment (all optional): BENCH_DATABASE_URL (admin connection; the bench makes and drops database
// `cinder_bench_lastn`), LASTN_SIZES, LASTN_CODES, LASTN_REQUESTS (default 200), LASTN_WARMUP (default 30),
// LASTN_ROUNDS (default 3), LASTN_KEEP=1 (leaves the database for a look with psql), LASTN_EXPLAIN=1 (also prints
// the plans of $lastn's queries for the largest Patient).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { makePatient } from './patients.js';
import {
  batch,
  dropDatabase,
  freshDatabase,
  login,
  quantityObservation,
  startServer,
  type QuantityCode,
} from './server.js';

const SIZES = (process.env.LASTN_SIZES ?? '10,100,1000,10000').split(',').map(Number);
const REQUESTS = Number(process.env.LASTN_REQUESTS ?? 200);
const WARMUP = Number(process.env.LASTN_WARMUP ?? 30);
const ROUNDS = Number(process.env.LASTN_ROUNDS ?? 3);
const LOADERS = 4;
const BATCH = 1000;
const DB = 'cinder_bench_lastn';

/** Vital-sign LOINC codes (display, unit, typical value). */
const VITALS = [
  ['8867-4', 'Heart rate', '/min', 72],
  ['8480-6', 'Systolic blood pressure', 'mm[Hg]', 120],
  ['8462-4', 'Diastolic blood pressure', 'mm[Hg]', 80],
  ['29463-7', 'Body weight', 'kg', 75],
  ['8302-2', 'Body height', 'cm', 170],
  ['9279-1', 'Respiratory rate', '/min', 16],
  ['8310-5', 'Body temperature', 'Cel', 37],
  ['59408-5', 'Oxygen saturation by pulse oximetry', '%', 97],
  ['39156-5', 'Body mass index', 'kg/m2', 24],
  ['8287-5', 'Head circumference', 'cm', 56],
  ['2708-6', 'Oxygen saturation in arterial blood', '%', 97],
  ['8478-0', 'Mean blood pressure', 'mm[Hg]', 93],
  ['3140-1', 'Venous oxygen saturation', '%', 70],
  ['8331-1', 'Oral temperature', 'Cel', 36.8],
  ['8893-0', 'Peripheral pulse rate', '/min', 70],
  ['3141-9', 'Body weight measured', 'kg', 74],
  ['8306-3', 'Body height lying', 'cm', 80],
  ['77606-2', 'Weight-for-length percentile', '%', 50],
  ['59576-9', 'BMI percentile', '%', 50],
  ['8289-1', 'Head circumference percentile', '%', 50],
] as const;
const CODES = VITALS.slice(0, Math.min(VITALS.length, Number(process.env.LASTN_CODES ?? 10)));
const TEN_YEARS_MS = 10 * 365 * 86_400_000;
const START = Date.UTC(2015, 0, 1);

/** When the i-th of `of` Observations was taken: spread over ten years, plus a pseudo-random minute. */
const effective = (i: number, of: number): string =>
  new Date(START + Math.floor((i * TEN_YEARS_MS) / of) + ((i * 7919) % 3600) * 1000).toISOString();

function observation(patientId: string, i: number, of: number): Record<string, unknown> {
  return quantityObservation({
    patientId,
    coding: CODES[i % CODES.length] as QuantityCode,
    category: 'vital-signs',
    categoryDisplay: 'Vital Signs',
    effective: effective(i, of),
    factor: 0.9 + (i % 20) / 100,
  });
}

async function inParallel<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    }),
  );
}

const quantile = (sorted: number[], q: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;

interface Case {
  name: string;
  /** Observations of the Patient (undefined for the baselines). */
  size?: number;
  kind: string;
  path: string;
  /** Entries every answer must hold (a searchset Bundle), or undefined (not a Bundle). */
  entries?: number;
  /** effectiveDateTime the first entry must have (the newest Observation of the code), when set. */
  newest?: string;
  latencies: number[];
  /** Time spent in the measured requests (s): one at a time, so req/s = requests / seconds. */
  seconds: number;
}

/** One request; its latency in ms. Throws unless the answer is a 200 with the expected entry count. */
async function timed(base: string, token: string, c: Case): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${base}${c.path}`, { headers: { authorization: `Bearer ${token}` } });
  const body = await res.text();
  const ms = performance.now() - started;
  if (res.status !== 200) throw new Error(`${c.name}: ${res.status} ${body.slice(0, 300)}`);
  if (c.entries !== undefined) {
    const entry =
      (JSON.parse(body) as { entry?: { resource: { effectiveDateTime?: string } }[] }).entry ?? [];
    if (entry.length !== c.entries)
      throw new Error(`${c.name}: ${entry.length} entries, expected ${c.entries}`);
    const newest = entry[0]?.resource.effectiveDateTime;
    if (c.newest !== undefined && newest !== c.newest)
      throw new Error(`${c.name}: newest ${newest}, expected ${c.newest}`);
  }
  return ms;
}

/** $lastn's two queries (the SQL of lastn.ts, in the Patient's project) for one Patient, `max` per code. */
async function lastnQueries(
  client: pg.Client,
  patientId: string,
  max: number,
): Promise<{ text: string; values: unknown[] }[]> {
  const { skipScanSql, hitsSql, lastnGroups } = await import('../src/fhir/operations/lastn.js');
  const project = (
    await client.query<{ project_id: string }>(
      `SELECT project_id FROM resources WHERE resource_type = 'Patient' AND id = $1`,
      [patientId],
    )
  ).rows[0]?.project_id as string;
  const p = { subject: `Patient/${patientId}`, categories: ['*|vital-signs'], max };
  return [
    skipScanSql(p.subject, '*|vital-signs', 'code'),
    hitsSql(await lastnGroups(client, p), p, { projectId: project }),
  ];
}

interface PlanRoot {
  'Execution Time': number;
  'Planning Time': number;
  Plan: { 'Shared Hit Blocks': number; 'Shared Read Blocks': number };
}

/**
 * The database's side of `category=vital-signs&max=1` and `&max=3` for each Patient: execution and planning time of
 * both queries (medians of 5, from EXPLAIN ANALYZE) and the buffers they touch, a table; with LASTN_EXPLAIN=1 the plans
 * of the largest Patient too.
 */
async function explain(url: string, patients: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const rows = [];
    for (const [i, id] of patients.entries()) {
      const row: Record<string, number> = { Observations: SIZES[i] as number };
      for (const max of [1, 3]) {
        const times: number[] = [];
        const planning: number[] = [];
        let buffers = 0;
        for (let run = 0; run < 5; run++) {
          let ms = 0;
          let plan = 0;
          buffers = 0;
          for (const q of await lastnQueries(client, id, max)) {
            const r = await client.query<{ 'QUERY PLAN': PlanRoot[] }>(
              `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${q.text}`,
              q.values,
            );
            const root = r.rows[0]?.['QUERY PLAN'][0] as PlanRoot;
            ms += root['Execution Time'];
            plan += root['Planning Time'];
            buffers += root.Plan['Shared Hit Blocks'] + root.Plan['Shared Read Blocks'];
          }
          times.push(ms);
          planning.push(plan);
        }
        const med = (xs: number[]): number => +(xs.sort((a, b) => a - b)[2] as number).toFixed(3);
        row[`max=${max} execution ms`] = med(times);
        row[`max=${max} planning ms`] = med(planning);
        row[`max=${max} buffers`] = buffers;
      }
      rows.push(row);
    }
    console.log(
      'Database side of category=vital-signs&max=1 and &max=3 (EXPLAIN ANALYZE of both queries: the skip scan of ' +
        'codes and the newest rows per code; medians of 5):',
    );
    console.table(rows);
    if (process.env.LASTN_EXPLAIN === '1')
      for (const q of await lastnQueries(client, patients[patients.length - 1] as string, 3)) {
        const plan = await client.query<Record<string, string>>(
          `EXPLAIN (ANALYZE, BUFFERS) ${q.text}`,
          q.values,
        );
        console.log(`${plan.rows.map((r) => r['QUERY PLAN']).join('\n')}\n`);
      }
  } finally {
    await client.end();
  }
}

export async function benchLastn(notes: string[]): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-bench-lastn-'));
  fs.chmodSync(work, 0o755);
  const url = await freshDatabase(DB);
  const server = await startServer({ DATABASE_URL: url, DATA_DIR: path.join(work, 'files') }, work);
  try {
    const base = server.base;
    const token = await login(base);
    const patients = await batch(
      base,
      token,
      SIZES.map((_, i) => makePatient(i)),
    );
    const started = performance.now();
    const chunks: { patient: string; first: number; size: number }[] = [];
    SIZES.forEach((size, i) => {
      for (let first = 0; first < size; first += BATCH)
        chunks.push({ patient: patients[i] as string, first, size });
    });
    await inParallel(chunks, LOADERS, async ({ patient, first, size }) => {
      const obs = Array.from({ length: Math.min(BATCH, size - first) }, (_, k) =>
        observation(patient, first + k, size),
      );
      await batch(base, token, obs);
    });
    const total = SIZES.reduce((a, b) => a + b, 0);
    const loadSeconds = (performance.now() - started) / 1000;
    // As autovacuum would soon after a load of this size: the planner sees the tables as they are.
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query('ANALYZE');
    await client.end();
    notes.push(
      `lastn: loaded ${total} Observations (${SIZES.join(', ')} for one Patient each, ${CODES.length} codes) in ` +
        `${loadSeconds.toFixed(1)} s = ${Math.round(total / loadSeconds)} resources/s (batch Bundles of ${BATCH}, ` +
        `${LOADERS} clients)`,
    );

    const fhir = 'fhir/R4/';
    const code = `http://loinc.org|${CODES[0]?.[0]}`;
    const cases: Case[] = [
      { name: 'healthcheck (baseline)', kind: 'healthcheck', path: 'healthcheck', latencies: [], seconds: 0 },
      {
        name: 'read Patient/<id> (baseline)',
        kind: 'read',
        path: `${fhir}Patient/${patients[0]}`,
        latencies: [],
        seconds: 0,
      },
    ];
    SIZES.forEach((size, i) => {
      const q = `${fhir}Observation/$lastn?patient=${patients[i]}`;
      const codes = Math.min(CODES.length, size);
      cases.push(
        {
          name: `max=1, ${size} Obs`,
          size,
          kind: 'category=vital-signs&max=1',
          path: `${q}&category=vital-signs&max=1`,
          entries: codes,
          latencies: [],
          seconds: 0,
        },
        {
          name: `max=3, ${size} Obs`,
          size,
          kind: 'category=vital-signs&max=3',
          path: `${q}&category=vital-signs&max=3`,
          entries: Math.min(3 * codes, size),
          latencies: [],
          seconds: 0,
        },
        {
          name: `code=, ${size} Obs`,
          size,
          kind: `code=${code}`,
          path: `${q}&code=${encodeURIComponent(code)}`,
          entries: 1,
          // The code of Observations 0, n, 2n, … (n codes in turn): the last of them is the newest.
          newest: effective(Math.floor((size - 1) / CODES.length) * CODES.length, size),
          latencies: [],
          seconds: 0,
        },
      );
    });
    for (const c of cases) for (let i = 0; i < WARMUP; i++) await timed(base, token, c);
    // One request of each case per turn, in an order shuffled anew every turn (the same in every run: a fixed seed):
    // a burst of other work on the machine slows every case alike, and no case always follows the same one.
    let seed = 29;
    const random = (): number => (seed = (seed * 48_271) % 2_147_483_647) / 2_147_483_647; // Park–Miller
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < REQUESTS; i++) {
        const order = [...cases];
        for (let k = order.length - 1; k > 0; k--) {
          const j = Math.floor(random() * (k + 1));
          [order[k], order[j]] = [order[j] as Case, order[k] as Case];
        }
        for (const c of order) {
          const ms = await timed(base, token, c);
          c.latencies.push(ms);
          c.seconds += ms / 1000;
        }
      }
    }

    const stats = (c: Case) => {
      const s = [...c.latencies].sort((a, b) => a - b);
      return { median: quantile(s, 0.5), p95: quantile(s, 0.95), perSec: c.latencies.length / c.seconds };
    };
    const health = stats(cases[0] as Case).median;
    const smallest = new Map<string, number>();
    for (const c of cases) if (c.size === SIZES[0]) smallest.set(c.kind, stats(c).median);
    // The smallest Patient whose answer holds as many entries: record size apart from answer size (`max=3` with more
    // codes than the smallest Patient has Observations answers fewer entries for it).
    const sameAnswer = new Map<string, number>();
    for (const c of cases)
      if (c.size !== undefined && !sameAnswer.has(`${c.kind} ${c.entries}`))
        sameAnswer.set(`${c.kind} ${c.entries}`, stats(c).median);
    const sameRatio = (c: Case): number =>
      stats(c).median / (sameAnswer.get(`${c.kind} ${c.entries}`) as number);
    console.log(
      `\n$lastn by Observations per Patient: PostgreSQL, ${ROUNDS} rounds of ${REQUESTS} turns (one request of each case ` +
        `per turn, shuffled, one at a time, one connection) after ${WARMUP} warm-up requests each; medians and p95 of ` +
        `${ROUNDS * REQUESTS} requests per case; ${os.cpus().length} CPUs (load average ` +
        `${os.loadavg()[0]?.toFixed(1)}), Node ${process.version}\n`,
    );
    const rows = cases.map((c) => {
      const s = stats(c);
      const first = c.size === undefined ? undefined : smallest.get(c.kind);
      return {
        case: c.name,
        entries: c.entries ?? '',
        'median ms': +s.median.toFixed(2),
        'p95 ms': +s.p95.toFixed(2),
        'req/s': Math.round(s.perSec),
        'x healthcheck': +(s.median / health).toFixed(2),
        [`x ${SIZES[0]} Obs`]: first === undefined ? '' : +(s.median / first).toFixed(2),
        'x smallest, same entries': c.size === undefined ? '' : +sameRatio(c).toFixed(2),
      };
    });
    console.table(rows);
    const largest = SIZES[SIZES.length - 1];
    const worst = cases
      .filter((c) => c.size === largest)
      .map((c) => ({
        kind: c.kind,
        ratio: stats(c).median / (smallest.get(c.kind) as number),
        same: sameRatio(c),
        entries: c.entries,
      }));
    notes.push(
      `lastn: median at ${largest} Observations ÷ at ${SIZES[0]}: ` +
        worst
          .map(
            (w) =>
              `${w.kind} ${w.ratio.toFixed(2)}×` +
              (w.same === w.ratio
                ? ''
                : ` (${w.same.toFixed(2)}× the smallest answering ${w.entries} entries)`),
          )
          .join(', ') +
        (worst.every((w) => w.same <= 1.5) ? ' — flat: within 1.5×' : ' — NOT flat: above 1.5×'),
    );
    await explain(url, patients.slice(0, SIZES.length));
  } finally {
    await server.stop();
    if (process.env.LASTN_KEEP !== '1') await dropDatabase(DB).catch(() => undefined);
    fs.rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) {
  const notes: string[] = [];
  benchLastn(notes)
    .then(() => notes.forEach((n) => console.log(`- ${n}`)))
    .catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
}
