// Hot paths, measured (issue 16): starts the built servers to compare side by side, each on fresh data (10,000 Patients), and
// measures /healthcheck, read by id, `Patient?family=…&_count=20` and create Patient with autocannon (10
// connections, BENCH_RUNS rounds × BENCH_DURATION s, medians; in each round every target runs each test in turn),
// each with its ratio to the same target's healthcheck.
//
//   npm run build && npx tsx bench/hot-paths.ts
//
// Environment (all optional):
//   HOT_TARGETS   label=path/to/main.js,… builds to compare in one sitting (default `this=dist/main.js`), e.g.
//                 `base=/tmp/speed-base/dist/main.js,this=dist/main.js`
//   HOT_ENGINE    postgres (default; a fresh database per target on HOT_DATABASE_URL's server), or an embedded
//                 engine: embedded (PostgreSQL from npm, the default embedded engine), pglite or pglite-worker
//   HOT_DATABASE_URL  admin connection (default postgres://postgres@127.0.0.1:5432/postgres)
//   HOT_CONFIG    JSON merged into each server's configuration, e.g. '{"logLevel":"info"}'
//   HOT_CONFIG_<label>  JSON merged into that target's configuration only, e.g. HOT_CONFIG_quiet='{"requestLog":"none"}'
//   HOT_LOG_FILE  where the servers' stdout (log lines) goes (default /dev/null)
//   HOT_CPU_PROF  a directory: the servers run with --cpu-prof and write their profiles there on exit
//   HOT_TESTS     comma list among read,search,create (default all)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { families, makePatient } from './patients.js';
import { login, startServer, type RunningServer } from './server.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const PATIENTS = Number(process.env.BENCH_PATIENTS ?? 10_000);
const CONNECTIONS = 10;
const ENGINE = process.env.HOT_ENGINE ?? 'postgres';
const ADMIN_URL = process.env.HOT_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const TESTS = new Set((process.env.HOT_TESTS ?? 'read,search,create').split(','));
const TARGETS = (process.env.HOT_TARGETS ?? 'this=dist/main.js').split(',').map((t) => {
  const [label, main] = t.split('=') as [string, string];
  return { label, main };
});

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

interface Row {
  target: string;
  test: string;
  'req/s': number;
  'p50 ms': number;
  'p99 ms': number;
  'x health': string;
  errors: number;
}

type Options = Parameters<typeof autocannon>[0];

type Result = Awaited<ReturnType<typeof autocannon>>;

function summary(runs: Result[]): Omit<Row, 'target' | 'test' | 'x health'> {
  return {
    'req/s': Math.round(median(runs.map((r) => r.requests.average))),
    'p50 ms': median(runs.map((r) => r.latency.p50)),
    'p99 ms': median(runs.map((r) => r.latency.p99)),
    errors: runs.reduce((n, r) => n + r.non2xx + r.errors, 0),
  };
}

async function loadPatients(base: string, token: string): Promise<string[]> {
  const ids: string[] = [];
  const starts = Array.from({ length: Math.ceil(PATIENTS / 100) }, (_, k) => k * 100);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < starts.length) {
      const i = starts[next++] as number;
      const entry = Array.from({ length: Math.min(100, PATIENTS - i) }, (_, k) => ({
        resource: makePatient(i + k),
        request: { method: 'POST', url: 'Patient' },
      }));
      const res = await fetch(`${base}fhir/R4`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
        body: JSON.stringify({ resourceType: 'Bundle', type: 'batch', entry }),
      });
      if (!res.ok) throw new Error(`batch failed ${res.status} ${await res.text()}`);
      const body = (await res.json()) as { entry: { response: { location: string } }[] };
      for (const e of body.entry) ids.push(e.response.location.split('/')[1] as string);
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return ids;
}

async function freshDatabase(name: string): Promise<string> {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const u = new URL(ADMIN_URL);
  u.pathname = `/${name}`;
  return u.toString();
}

interface Loaded {
  label: string;
  server: RunningServer;
  tests: Map<string, Options>;
}

/** Loads the Patients into a started server and returns the autocannon options of each test against it. */
async function prepare(label: string, server: RunningServer): Promise<Loaded> {
  const base = server.base;
  const token = await login(base);
  const auth = { authorization: `Bearer ${token}` };
  const ids = await loadPatients(base, token);
  const fams = families();
  let n = 0;
  const tests = new Map<string, Options>([['healthcheck', { url: `${base}healthcheck` }]]);
  if (TESTS.has('read'))
    tests.set('read by id', {
      url: base,
      headers: auth,
      requests: [
        { method: 'GET', setupRequest: (r) => ({ ...r, path: `/fhir/R4/Patient/${ids[n++ % ids.length]}` }) },
      ],
    });
  if (TESTS.has('search'))
    tests.set('search family &_count=20', {
      url: base,
      headers: auth,
      requests: [
        {
          method: 'GET',
          setupRequest: (r) => ({
            ...r,
            path: `/fhir/R4/Patient?family=${encodeURIComponent(fams[n++ % fams.length] as string)}&_count=20`,
          }),
        },
      ],
    });
  if (TESTS.has('create'))
    tests.set('create Patient', {
      url: base,
      headers: { ...auth, 'content-type': 'application/fhir+json' },
      requests: [
        {
          method: 'POST',
          path: '/fhir/R4/Patient',
          setupRequest: (r) => ({ ...r, body: JSON.stringify(makePatient(PATIENTS + n++)) }),
        },
      ],
    });
  return { label, server, tests };
}

/**
 * Runs every test on every target in turn, RUNS rounds (target after target for each test, so that the machine's
 * other load falls on all of them alike), and reports medians with the ratio to the same target's healthcheck.
 */
async function measureAll(targets: Loaded[]): Promise<Row[]> {
  const results = new Map<string, Result[]>();
  for (let round = 0; round < RUNS; round++) {
    for (const test of (targets[0] as Loaded).tests.keys()) {
      for (const t of targets) {
        const opts = t.tests.get(test) as Options;
        const r = await autocannon({ ...opts, connections: CONNECTIONS, duration: DURATION });
        const key = `${t.label}\u0000${test}`;
        results.set(key, [...(results.get(key) ?? []), r]);
      }
    }
  }
  const rows: Row[] = [];
  for (const t of targets) {
    const health = summary(results.get(`${t.label}\u0000healthcheck`) ?? []);
    for (const test of t.tests.keys()) {
      const s = summary(results.get(`${t.label}\u0000${test}`) ?? []);
      rows.push({ target: t.label, test, ...s, 'x health': (s['req/s'] / health['req/s']).toFixed(2) });
    }
  }
  return rows;
}

async function main(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-hot-'));
  fs.chmodSync(work, 0o755); // reachable by the embedded PostgreSQL's user when run as root
  const extra = JSON.parse(process.env.HOT_CONFIG ?? '{}') as Record<string, unknown>;
  const stdout = fs.openSync(process.env.HOT_LOG_FILE ?? '/dev/null', 'a');
  const prof = process.env.HOT_CPU_PROF;
  const started: Loaded[] = [];
  let rows: Row[] = [];
  try {
    for (const [i, t] of TARGETS.entries()) {
      const env: Record<string, string> =
        ENGINE !== 'postgres'
          ? {
              DATA_DIR: path.join(work, `data-${i}`),
              EMBEDDED_ENGINE: ENGINE === 'embedded' ? 'postgres' : ENGINE,
            }
          : { DATABASE_URL: await freshDatabase(`cinder_hot_${i}`), DATA_DIR: path.join(work, `files-${i}`) };
      const own = JSON.parse(process.env[`HOT_CONFIG_${t.label}`] ?? '{}') as Record<string, unknown>;
      const server = await startServer(
        env,
        work,
        { ...extra, ...own },
        {
          main: t.main,
          stdout,
          ...(prof ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${prof}`] } : {}),
        },
      );
      started.push({ label: t.label, server, tests: new Map() });
      started[started.length - 1] = await prepare(t.label, server);
    }
    rows = await measureAll(started);
    for (const t of started) console.log(`${t.label}: peak RSS ${t.server.peakRssMb()} MB`);
  } finally {
    for (const t of started) await t.server.stop();
    fs.closeSync(stdout);
    fs.rmSync(work, { recursive: true, force: true });
  }
  console.log(
    `\nhot paths on ${ENGINE}: ${CONNECTIONS} connections, medians of ${RUNS} × ${DURATION} s, ${PATIENTS} Patients, ` +
      `${os.cpus().length} CPUs, Node ${process.version}, config ${JSON.stringify(extra)}`,
  );
  console.table(rows);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
