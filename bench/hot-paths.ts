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
//   HOT_DB_PREFIX the targets' databases are <prefix>0, <prefix>1, … (default cinder_hot_), dropped and made anew:
//                 give each sitting on a shared PostgreSQL its own prefix
//   HOT_CONFIG    JSON merged into each server's configuration, e.g. '{"logLevel":"info"}'
//   HOT_CONFIG_<label>  JSON merged into that target's configuration only, e.g. HOT_CONFIG_quiet='{"requestLog":"none"}'
//   HOT_LOG_FILE  where the servers' stdout (log lines) goes (default /dev/null)
//   HOT_CPU_PROF  a directory: the servers run with --cpu-prof and write their profiles there on exit
//   HOT_TESTS     comma list among read,search,create (default all)
//   HOT_NODE_ARGS_<label>  extra Node flags of that target, e.g. HOT_NODE_ARGS_small='--max-semi-space-size=4'
//   HOT_DB_HOST_<label>  that target connects to its database through this host instead, e.g. a Unix socket's
//                 directory (HOT_DB_HOST_unix=/var/run/postgresql) against TCP on 127.0.0.1
//
// Besides req/s, each row gives the CPU time per answered request of the server process (Node) and of its database
// (the embedded PostgreSQL's processes, or the backends connected to the target's database), medians over the
// rounds: on a machine other work shares, CPU per request moves less than throughput does.
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
const DB_PREFIX = process.env.HOT_DB_PREFIX ?? 'cinder_hot_';
if (!/^[a-z_][a-z0-9_]*$/.test(DB_PREFIX))
  throw new Error(`HOT_DB_PREFIX must be a lower-case SQL name: ${DB_PREFIX}`);
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
  'Node CPU ms': number;
  'DB CPU ms': number;
  errors: number;
}

const TICK_MS = 10; // USER_HZ: /proc times are in hundredths of a second on Linux

/** CPU time (user + system, in clock ticks) of a process so far; 0 when it is gone. */
function ticks(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

/** The descendants of a process (the embedded PostgreSQL's processes are the server's). */
function descendants(pid: number): number[] {
  try {
    const c = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    return c ? c.split(/\s+/).flatMap((k) => [Number(k), ...descendants(Number(k))]) : [];
  } catch {
    return [];
  }
}

/** CPU ticks so far of a target's server and of each of its database's processes (by pid). */
async function cpuTicks(t: Loaded): Promise<{ node: number; db: Map<number, number> }> {
  let pids = descendants(t.server.pid);
  if (t.database) {
    const client = new pg.Client({ connectionString: ADMIN_URL });
    await client.connect();
    try {
      const r = await client.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [
        t.database,
      ]);
      pids = r.rows.map((x) => x.pid);
    } finally {
      await client.end();
    }
  }
  return { node: ticks(t.server.pid), db: new Map(pids.map((p) => [p, ticks(p)])) };
}

type Options = Parameters<typeof autocannon>[0];

type Result = Awaited<ReturnType<typeof autocannon>>;

interface Measured {
  result: Result;
  nodeMs: number;
  dbMs: number;
}

function summary(runs: Measured[]): Omit<Row, 'target' | 'test' | 'x health'> {
  return {
    'req/s': Math.round(median(runs.map((r) => r.result.requests.average))),
    'p50 ms': median(runs.map((r) => r.result.latency.p50)),
    'p99 ms': median(runs.map((r) => r.result.latency.p99)),
    'Node CPU ms': Number(median(runs.map((r) => r.nodeMs)).toFixed(3)),
    'DB CPU ms': Number(median(runs.map((r) => r.dbMs)).toFixed(3)),
    errors: runs.reduce((n, r) => n + r.result.non2xx + r.result.errors, 0),
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

/** The URL with its host given as a `host` parameter (a Unix socket's directory, for node-postgres), if any. */
function withHost(url: string, host: string | undefined): string {
  if (!host) return url;
  const u = new URL(url);
  u.searchParams.set('host', host);
  return u.toString();
}

interface Loaded {
  label: string;
  server: RunningServer;
  tests: Map<string, Options>;
  /** The target's own database on HOT_DATABASE_URL's server (undefined for an embedded engine). */
  database?: string;
  /** Highest memory seen of the server and its children (PSS, MB), sampled every 0.5 s. */
  peakTreeMb: number;
}

/** Loads the Patients into a started server and returns the autocannon options of each test against it. */
async function prepare(label: string, server: RunningServer, database: string | undefined): Promise<Loaded> {
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
  return { label, server, tests, peakTreeMb: server.treeMb(), ...(database ? { database } : {}) };
}

/**
 * Runs every test on every target in turn, RUNS rounds (target after target for each test, so that the machine's
 * other load falls on all of them alike), and reports medians with the ratio to the same target's healthcheck.
 */
async function measureAll(targets: Loaded[]): Promise<Row[]> {
  const results = new Map<string, Measured[]>();
  const sampler = setInterval(() => {
    for (const t of targets) t.peakTreeMb = Math.max(t.peakTreeMb, t.server.treeMb());
  }, 500);
  try {
    for (let round = 0; round < RUNS; round++) {
      for (const test of (targets[0] as Loaded).tests.keys()) {
        for (const t of targets) {
          const opts = t.tests.get(test) as Options;
          const before = await cpuTicks(t);
          const r = await autocannon({ ...opts, connections: CONNECTIONS, duration: DURATION });
          const after = await cpuTicks(t);
          let db = 0;
          for (const [pid, n] of after.db) db += n - (before.db.get(pid) ?? 0);
          const per = (n: number): number => (n * TICK_MS) / Math.max(1, r.requests.total);
          const key = `${t.label}\u0000${test}`;
          results.set(key, [
            ...(results.get(key) ?? []),
            { result: r, nodeMs: per(after.node - before.node), dbMs: per(db) },
          ]);
        }
      }
    }
  } finally {
    clearInterval(sampler);
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
      const database = ENGINE === 'postgres' ? `${DB_PREFIX}${i}` : undefined;
      const env: Record<string, string> = database
        ? {
            DATABASE_URL: withHost(await freshDatabase(database), process.env[`HOT_DB_HOST_${t.label}`]),
            DATA_DIR: path.join(work, `files-${i}`),
          }
        : {
            DATA_DIR: path.join(work, `data-${i}`),
            EMBEDDED_ENGINE: ENGINE === 'embedded' ? 'postgres' : ENGINE,
          };
      const nodeArgs = [
        ...(prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : []),
        ...(process.env[`HOT_NODE_ARGS_${t.label}`] ?? '').split(' ').filter(Boolean),
      ];
      const own = JSON.parse(process.env[`HOT_CONFIG_${t.label}`] ?? '{}') as Record<string, unknown>;
      const server = await startServer(
        env,
        work,
        { ...extra, ...own },
        {
          main: t.main,
          stdout,
          nodeArgs,
        },
      );
      started.push({ label: t.label, server, tests: new Map(), peakTreeMb: 0 });
      started[started.length - 1] = await prepare(t.label, server, database);
    }
    rows = await measureAll(started);
    for (const t of started)
      console.log(
        `${t.label}: peak RSS of Node ${t.server.peakRssMb()} MB; peak PSS of Node and its children during the runs ${t.peakTreeMb} MB`,
      );
  } finally {
    for (const t of started) await t.server.stop();
    fs.closeSync(stdout);
    fs.rmSync(work, { recursive: true, force: true });
  }
  console.log(
    `\nhot paths on ${ENGINE}: ${CONNECTIONS} connections, medians of ${RUNS} × ${DURATION} s, ${PATIENTS} Patients, ` +
      `${os.cpus().length} CPUs (load average ${os.loadavg()[0]?.toFixed(1)}), Node ${process.version}, config ${JSON.stringify(extra)}`,
  );
  console.table(rows);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
