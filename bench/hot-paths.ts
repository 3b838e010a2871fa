// Hot paths, measured (issue 16): starts built servers one after the other on fresh data (10,000 Patients), and
// measures /healthcheck, read by id, `Patient?family=…&_count=20` and create Patient with autocannon (10
// connections, BENCH_RUNS × BENCH_DURATION s, medians), each with its ratio to the healthcheck of the same go.
//
//   npm run build && npx tsx bench/hot-paths.ts
//
// Environment (all optional):
//   HOT_TARGETS   label=path/to/main.js,… builds to compare in one sitting (default `this=dist/main.js`), e.g.
//                 `base=/tmp/speed-base/dist/main.js,this=dist/main.js`
//   HOT_ENGINE    postgres (default; a fresh database per target on HOT_DATABASE_URL's server) or pglite
//   HOT_DATABASE_URL  admin connection (default postgres://postgres@127.0.0.1:5432/postgres)
//   HOT_CONFIG    JSON merged into each server's configuration, e.g. '{"logLevel":"info"}'
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

async function measure(opts: Options): Promise<Omit<Row, 'target' | 'test' | 'x health'>> {
  const runs: Awaited<ReturnType<typeof autocannon>>[] = [];
  for (let i = 0; i < RUNS; i++)
    runs.push(await autocannon({ connections: CONNECTIONS, duration: DURATION, ...opts }));
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

async function benchTarget(label: string, server: RunningServer, rows: Row[]): Promise<void> {
  const base = server.base;
  const token = await login(base);
  const auth = { authorization: `Bearer ${token}` };
  const ids = await loadPatients(base, token);
  const fams = families();
  let n = 0;
  const health = await measure({ url: `${base}healthcheck` });
  const add = (test: string, r: Awaited<ReturnType<typeof measure>>): void => {
    rows.push({ target: label, test, ...r, 'x health': (r['req/s'] / health['req/s']).toFixed(2) });
  };
  add('healthcheck', health);
  if (TESTS.has('read'))
    add(
      'read by id',
      await measure({
        url: base,
        headers: auth,
        requests: [
          {
            method: 'GET',
            setupRequest: (r) => ({ ...r, path: `/fhir/R4/Patient/${ids[n++ % ids.length]}` }),
          },
        ],
      }),
    );
  if (TESTS.has('search'))
    add(
      'search family &_count=20',
      await measure({
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
      }),
    );
  if (TESTS.has('create'))
    add(
      'create Patient',
      await measure({
        url: base,
        headers: { ...auth, 'content-type': 'application/fhir+json' },
        requests: [
          {
            method: 'POST',
            path: '/fhir/R4/Patient',
            setupRequest: (r) => ({ ...r, body: JSON.stringify(makePatient(PATIENTS + n++)) }),
          },
        ],
      }),
    );
  console.log(`${label}: peak RSS ${server.peakRssMb()} MB`);
}

async function main(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-hot-'));
  const extra = JSON.parse(process.env.HOT_CONFIG ?? '{}') as Record<string, unknown>;
  const stdout = fs.openSync(process.env.HOT_LOG_FILE ?? '/dev/null', 'a');
  const prof = process.env.HOT_CPU_PROF;
  const rows: Row[] = [];
  try {
    for (const [i, t] of TARGETS.entries()) {
      const env: Record<string, string> =
        ENGINE === 'pglite'
          ? { DATA_DIR: path.join(work, `data-${i}`) }
          : { DATABASE_URL: await freshDatabase(`cinder_hot_${i}`), DATA_DIR: path.join(work, `files-${i}`) };
      const server = await startServer(env, work, extra, {
        main: t.main,
        stdout,
        ...(prof ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${prof}`] } : {}),
      });
      try {
        await benchTarget(t.label, server, rows);
      } finally {
        await server.stop();
      }
    }
  } finally {
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
