// Cluster mode, measured (issue 30 point 4): one worker process against two (`workers: 2`) on this machine. Two built
// servers, each on its own embedded PostgreSQL (the default deployment) loaded with the same 10,000 Patients, are
// measured in turn with autocannon (10 connections): /healthcheck, read by id, `Patient?family=…&_count=20` and
// create Patient, CLUSTER_RUNS rounds × BENCH_DURATION s, interleaved (each round runs every test on both servers,
// which one first alternating), medians, and the ratio 2 workers / 1 worker. Where the CPU goes during each run is
// measured from /proc: the Cinder Node processes, their PostgreSQL, this process (the load generator) and everything
// else on the machine (other load), in cores busy on average.
//
//   npm run build && npx tsx bench/cluster.ts          (npm run bench runs it too; BENCH_CLUSTER=0 skips it)
//
// Environment (optional): CLUSTER_RUNS (default 5), BENCH_DURATION (5), BENCH_PATIENTS (10000),
// CLUSTER_WORKERS (the larger count, default 2), CLUSTER_DATABASE=external: both servers on one fresh database of
// BENCH_DATABASE_URL's PostgreSQL instead (its CPU is then counted in "other").
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import autocannon from 'autocannon';
import { families, makePatient } from './patients.js';
import { batch, freshDatabase, dropDatabase, login, startServer, type RunningServer } from './server.js';

const CONNECTIONS = 10;
const PATIENTS = Number(process.env.BENCH_PATIENTS ?? 10_000);

type Options = Parameters<typeof autocannon>[0];
type Result = Awaited<ReturnType<typeof autocannon>>;

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

/** CPU ticks (USER_HZ) used so far by each process of a tree: pid → kind and ticks. */
type Ticks = Map<number, { kind: 'node' | 'postgres'; ticks: number }>;

function treeTicks(pid: number): Ticks {
  const out: Ticks = new Map();
  const visit = (p: number): void => {
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ticks = Number(fields[11]) + Number(fields[12]); // utime + stime
      if (comm.startsWith('postgres')) out.set(p, { kind: 'postgres', ticks });
      else if (comm.startsWith('node')) out.set(p, { kind: 'node', ticks });
      const children = fs.readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim();
      for (const c of children ? children.split(/\s+/) : []) visit(Number(c));
    } catch {
      // gone
    }
  };
  visit(pid);
  return out;
}

/** CPU seconds a kind of process used between two readings (a process that ended meanwhile is left out). */
function used(before: Ticks, after: Ticks, kind: 'node' | 'postgres'): number {
  let ticks = 0;
  for (const [pid, p] of after) if (p.kind === kind) ticks += p.ticks - (before.get(pid)?.ticks ?? 0);
  return ticks / HZ;
}

/** The machine's busy and total CPU ticks (all cores) from /proc/stat. */
function machineTicks(): { busy: number; total: number } {
  const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0] as string;
  const v = line.trim().split(/\s+/).slice(1, 9).map(Number);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  const total = v.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

/** Ticks per second of /proc (USER_HZ; 100 on Linux). */
const HZ = 100;

interface CpuShare {
  node: number;
  postgres: number;
  loadgen: number;
  other: number;
  idle: number;
}

/** Runs autocannon against one server, measuring in cores where the machine's CPU went meanwhile. */
async function run(
  server: RunningServer,
  opts: Options,
  duration: number,
): Promise<{ r: Result; cpu: CpuShare }> {
  const t0 = treeTicks(server.pid);
  const m0 = machineTicks();
  const u0 = process.cpuUsage();
  const w0 = performance.now();
  const r = await autocannon({ ...opts, connections: CONNECTIONS, duration });
  const seconds = (performance.now() - w0) / 1000;
  const u = process.cpuUsage(u0);
  const t1 = treeTicks(server.pid);
  const m1 = machineTicks();
  const cores = os.availableParallelism();
  const busyCores = ((m1.busy - m0.busy) / (m1.total - m0.total)) * cores;
  const node = used(t0, t1, 'node') / seconds;
  const postgres = used(t0, t1, 'postgres') / seconds;
  const loadgen = (u.user + u.system) / 1e6 / seconds;
  return {
    r,
    cpu: {
      node,
      postgres,
      loadgen,
      other: Math.max(0, busyCores - node - postgres - loadgen),
      idle: Math.max(0, cores - busyCores),
    },
  };
}

interface Target {
  label: string;
  workers: number;
  server: RunningServer;
  tests: Map<string, Options>;
}

/** Loads the Patients (batch Bundles of 100, two clients); their ids. */
async function load(base: string, token: string): Promise<string[]> {
  const ids: string[] = [];
  const starts = Array.from({ length: Math.ceil(PATIENTS / 100) }, (_, k) => k * 100);
  let next = 0;
  const client = async (): Promise<void> => {
    while (next < starts.length) {
      const i = starts[next++] as number;
      const resources = Array.from({ length: Math.min(100, PATIENTS - i) }, (_, k) => makePatient(i + k));
      ids.push(...(await batch(base, token, resources)));
    }
  };
  await Promise.all([client(), client()]);
  return ids;
}

async function prepare(
  label: string,
  workers: number,
  server: RunningServer,
  loaded?: string[],
): Promise<Target & { ids: string[] }> {
  const base = server.base;
  const token = await login(base);
  const auth = { authorization: `Bearer ${token}` };
  const ids = loaded ?? (await load(base, token));
  const fams = families();
  let n = 0;
  const tests = new Map<string, Options>([
    ['healthcheck', { url: `${base}healthcheck` }],
    [
      'read by id',
      {
        url: base,
        headers: auth,
        requests: [
          {
            method: 'GET',
            setupRequest: (r) => ({ ...r, path: `/fhir/R4/Patient/${ids[n++ % ids.length]}` }),
          },
        ],
      },
    ],
    [
      'search family &_count=20',
      {
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
      },
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
            setupRequest: (r) => ({ ...r, body: JSON.stringify(makePatient(PATIENTS + n++)) }),
          },
        ],
      },
    ],
  ]);
  return { label, workers, server, tests, ids };
}

/** Waits until the server's log says all its workers listen (a started cluster answers as soon as one does). */
async function allWorkersReady(logFile: string, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!fs.readFileSync(logFile, 'utf8').includes('"all workers are ready"')) {
    if (Date.now() > deadline) throw new Error('the workers did not all start');
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface ClusterRow {
  test: string;
  '1 worker req/s': number;
  'N workers req/s': number;
  'ratio N/1': string;
  '1 worker p50 ms': number;
  'N workers p50 ms': number;
  errors: number;
}

export interface CpuRow {
  target: string;
  test: string;
  'node cores': string;
  'postgres cores': string;
  'load generator cores': string;
  'other load cores': string;
  'idle cores': string;
  'node ms/req': string;
  'postgres ms/req': string;
  'load generator ms/req': string;
}

/**
 * What this machine could give each target were it otherwise idle, from the CPU each request costs (medians of the
 * runs): one worker is bound by one core for Node, or by every core for Node, PostgreSQL and the load generator
 * together; N workers only by the latter (and N cores for Node).
 */
export interface CeilingRow {
  test: string;
  '1 worker ceiling req/s': number;
  'N workers ceiling req/s': number;
  'ceiling ratio N/1': string;
  'bound (N workers)': string;
}

/** Measures 1 against N workers; returns the tables and pushes one summary line per test into notes. */
export async function benchCluster(
  runs: number,
  duration: number,
  notes: string[],
): Promise<{ rows: ClusterRow[]; cpu: CpuRow[]; ceilings: CeilingRow[] }> {
  const many = Number(process.env.CLUSTER_WORKERS ?? 2);
  const external = process.env.CLUSTER_DATABASE === 'external';
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-cluster-bench-'));
  fs.chmodSync(work, 0o755); // reachable by the embedded PostgreSQL's user when run as root
  const targets: Target[] = [];
  const load0 = os.loadavg()[0] as number;
  const dbName = 'cinder_cluster_bench';
  try {
    const dbUrl = external ? await freshDatabase(dbName) : undefined;
    let shared: string[] | undefined;
    for (const [label, workers] of [
      ['1 worker', 1],
      [`${many} workers`, many],
    ] as const) {
      const logFile = path.join(work, `${workers}.log`);
      const stdout = fs.openSync(logFile, 'a');
      const env: Record<string, string> = {
        WORKERS: String(workers),
        DATA_DIR: path.join(work, `data-${workers}`),
        ...(dbUrl ? { DATABASE_URL: dbUrl } : { EMBEDDED_ENGINE: 'postgres' }),
      };
      // info, for the cluster's 'all workers are ready' line; no request log lines (as logLevel warn has none).
      const server = await startServer(env, work, { logLevel: 'info', requestLog: 'none' }, { stdout });
      fs.closeSync(stdout);
      targets.push({ label, workers, server, tests: new Map() });
      if (workers > 1) await allWorkersReady(logFile);
      // On one shared database the second server finds the first one's Patients: both measure the same data.
      const prepared = await prepare(label, workers, server, external ? shared : undefined);
      shared = prepared.ids;
      targets[targets.length - 1] = prepared;
    }
    const results = new Map<string, { r: Result; cpu: CpuShare }[]>();
    for (let round = 0; round < runs; round++) {
      for (const test of (targets[0] as Target).tests.keys()) {
        const order = round % 2 === 0 ? targets : [...targets].reverse();
        for (const t of order) {
          const out = await run(t.server, t.tests.get(test) as Options, duration);
          const key = `${t.label}\u0000${test}`;
          results.set(key, [...(results.get(key) ?? []), out]);
        }
      }
    }
    const [one, n] = targets as [Target, Target];
    // Memory after the runs: Node processes and their PostgreSQL together (PSS, shared pages divided).
    for (const t of targets)
      notes.push(
        `cluster: ${t.label}: ${t.server.treeMb()} MB (PSS of Node and PostgreSQL processes) after the runs`,
      );
    const rows: ClusterRow[] = [];
    const cpu: CpuRow[] = [];
    const ceilings: CeilingRow[] = [];
    const costs = new Map<string, { node: number; all: number }>();
    for (const test of one.tests.keys()) {
      const a = results.get(`${one.label}\u0000${test}`) ?? [];
      const b = results.get(`${n.label}\u0000${test}`) ?? [];
      const rpsA = Math.round(median(a.map((x) => x.r.requests.average)));
      const rpsB = Math.round(median(b.map((x) => x.r.requests.average)));
      rows.push({
        test,
        '1 worker req/s': rpsA,
        'N workers req/s': rpsB,
        'ratio N/1': (rpsB / rpsA).toFixed(2),
        '1 worker p50 ms': median(a.map((x) => x.r.latency.p50)),
        'N workers p50 ms': median(b.map((x) => x.r.latency.p50)),
        errors: [...a, ...b].reduce((s, x) => s + x.r.non2xx + x.r.errors, 0),
      });
      notes.push(
        `cluster: ${test}: ${rpsA} req/s with 1 worker, ${rpsB} with ${many} (×${(rpsB / rpsA).toFixed(2)})`,
      );
      for (const [t, xs] of [
        [one, a],
        [n, b],
      ] as const) {
        const m = (f: (c: CpuShare) => number): string => median(xs.map((x) => f(x.cpu))).toFixed(2);
        const perRequest = (f: (c: CpuShare) => number): number =>
          median(xs.map((x) => (f(x.cpu) / Math.max(1, x.r.requests.average)) * 1000));
        cpu.push({
          target: t.label,
          test,
          'node cores': m((c) => c.node),
          'postgres cores': m((c) => c.postgres),
          'load generator cores': m((c) => c.loadgen),
          'other load cores': m((c) => c.other),
          'idle cores': m((c) => c.idle),
          'node ms/req': perRequest((c) => c.node).toFixed(3),
          'postgres ms/req': perRequest((c) => c.postgres).toFixed(3),
          'load generator ms/req': perRequest((c) => c.loadgen).toFixed(3),
        });
        costs.set(`${t.label}\u0000${test}`, {
          node: perRequest((c) => c.node),
          all: perRequest((c) => c.node + c.postgres + c.loadgen),
        });
      }
      const cores = os.availableParallelism();
      const c1 = costs.get(`${one.label}\u0000${test}`) as { node: number; all: number };
      const cn = costs.get(`${n.label}\u0000${test}`) as { node: number; all: number };
      const ceil1 = Math.min(1000 / c1.node, (cores * 1000) / c1.all);
      const ceilN = Math.min((Math.min(many, cores) * 1000) / cn.node, (cores * 1000) / cn.all);
      ceilings.push({
        test,
        '1 worker ceiling req/s': Math.round(ceil1),
        'N workers ceiling req/s': Math.round(ceilN),
        'ceiling ratio N/1': (ceilN / ceil1).toFixed(2),
        'bound (N workers)':
          (cores * 1000) / cn.all <= (Math.min(many, cores) * 1000) / cn.node
            ? `${cores} cores shared by Node, PostgreSQL and the load generator`
            : 'Node',
      });
      notes.push(
        `cluster: ${test}: on an otherwise idle ${cores}-core machine at these CPU costs: ${Math.round(ceil1)} → ${Math.round(ceilN)} req/s (×${(ceilN / ceil1).toFixed(2)})`,
      );
    }
    const load1 = os.loadavg()[0] as number;
    console.log(
      `\ncluster: 1 vs ${many} workers on ${external ? 'one PostgreSQL database (databaseUrl)' : 'the embedded PostgreSQL (one each)'}, ` +
        `${CONNECTIONS} connections, medians of ${runs} interleaved × ${duration} s, ${PATIENTS} Patients, ` +
        `${os.availableParallelism()} CPUs, Node ${process.version}, load average ${load0.toFixed(1)} → ${load1.toFixed(1)}`,
    );
    console.table(rows.map((r) => ({ ...r })));
    console.log('where the CPU went during the runs (cores busy on average, medians):');
    console.table(cpu);
    console.log('ceilings from the CPU per request (what an otherwise idle machine would allow):');
    console.table(ceilings);
    notes.push(
      `cluster: load average ${load0.toFixed(1)} → ${load1.toFixed(1)} on ${os.availableParallelism()} CPUs during the cluster runs`,
    );
    return { rows, cpu, ceilings };
  } finally {
    for (const t of targets) await t.server.stop();
    if (external) await dropDatabase(dbName).catch(() => undefined);
    fs.rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const notes: string[] = [];
  benchCluster(Number(process.env.CLUSTER_RUNS ?? 5), Number(process.env.BENCH_DURATION ?? 5), notes)
    .then(() => notes.forEach((n) => console.log(`- ${n}`)))
    .catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
}
