// What the audit trail (issue 28, API.md §10) costs, on PostgreSQL: two servers, each on a fresh database loaded with
// the same data (AUDIT_PATIENTS Patients, default 2000, AUDIT_OBS Observations each, default 5), one with auditing
// (config `audit: true`, the default) and one without (`audit: false`). After a 2 s warm-up, read (`GET Patient/<id>`),
// search (`GET Observation?subject=Patient/<id>&_count=10`) and create (`POST Observation`) run with autocannon
// (AUDIT_CONNECTIONS, default 10) against each in turn, interleaved (AUDIT_RUNS rounds, default 5, of BENCH_DURATION s;
// which server goes first alternates by round): medians of req/s and p99, the ratio on/off of the medians, and the
// median of each round's on/off (steadier when other work shares the machine); and the CPU time per answered request of
// the server process and of its database's PostgreSQL backends (from /proc, counted until 1.2 s after each run so that
// the buffered rows' INSERTs are in it): on a busy machine one run's throughput depends on what else runs, its CPU time
// per request much less. Then the audit table's growth: after the buffered reads' rows are stored (> 1 s) and `VACUUM
// ANALYZE audit_events`, its size (heap and TOAST, indexes) per row × 1,000,000 = bytes per million audited requests,
// the mean AuditEvent JSON per interaction, and whether every request sent during the runs made exactly one row (the
// rows from before the runs — the login, the loading batches — are counted apart). AUDIT_TESTS=read,search limits the
// kinds; AUDIT_RATE=<req/s> sends at that rate in all (autocannon overallRate) instead of as fast as the server
// answers, so that CPU time per request is compared under the same load; AUDIT_CPU_PROF=<dir> runs both servers with
// --cpu-prof (profiles written there when they stop; see bench/profile-summary.ts).
// Run alone with `npx tsx bench/audit.ts` (after `npm run build`), or as part of `npm run bench` (BENCH_AUDIT=0 skips).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { makePatient } from './patients.js';
import {
  dropDatabase,
  freshDatabase,
  login,
  startServer,
  type RunningServer,
  batch,
  quantityObservation,
  type QuantityCode,
} from './server.js';

const PATIENTS = Number(process.env.AUDIT_PATIENTS ?? 2000);
const OBS = Number(process.env.AUDIT_OBS ?? 5);
const CONNECTIONS = Number(process.env.AUDIT_CONNECTIONS ?? 10);
/** AUDIT_RATE: requests per second in all (autocannon overallRate), so that both servers carry the same load. */
const RATE = Number(process.env.AUDIT_RATE ?? 0);
const WARMUP = 2;
const LOADERS = 4;
const BATCH = 100;
/** A directory: both servers run with --cpu-prof and write their profiles there when they stop. */
const CPU_PROF = process.env.AUDIT_CPU_PROF;
const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

type Options = Parameters<typeof autocannon>[0];
type Result = Awaited<ReturnType<typeof autocannon>>;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

const CODES = [
  ['8867-4', 'Heart rate', '/min', 72],
  ['8480-6', 'Systolic blood pressure', 'mm[Hg]', 120],
  ['8462-4', 'Diastolic blood pressure', 'mm[Hg]', 80],
  ['29463-7', 'Body weight', 'kg', 75],
  ['8302-2', 'Body height', 'cm', 170],
  ['2339-0', 'Glucose', 'mg/dL', 95],
] as const;

function observation(patientId: string, i: number): Record<string, unknown> {
  return quantityObservation({
    patientId,
    coding: CODES[i % CODES.length] as QuantityCode,
    category: 'vital-signs',
    effective: new Date(Date.UTC(2015, 0, 1) + ((i * 37) % 3000) * 86_400_000).toISOString(),
    factor: 0.8 + (i % 40) / 100,
  });
}

/** Loads the Patients and their Observations (the same on every server); answers the Patients' ids. */
async function load(base: string, token: string): Promise<string[]> {
  const ids: string[] = [];
  const chunks = Math.ceil(PATIENTS / BATCH);
  let next = 0;
  await Promise.all(
    Array.from({ length: LOADERS }, async () => {
      while (next < chunks) {
        const first = next++ * BATCH;
        const patients = Array.from({ length: Math.min(BATCH, PATIENTS - first) }, (_, k) =>
          makePatient(first + k),
        );
        const made = await batch(base, token, patients);
        made.forEach((id, k) => (ids[first + k] = id));
        const obs = made.flatMap((id, k) =>
          Array.from({ length: OBS }, (_, j) => observation(id, (first + k) * OBS + j)),
        );
        for (let i = 0; i < obs.length; i += BATCH) await batch(base, token, obs.slice(i, i + BATCH));
      }
    }),
  );
  return ids;
}

const ALL_KINDS = ['read', 'search', 'create'] as const;
type Kind = (typeof ALL_KINDS)[number];
/** AUDIT_TESTS: a comma list among read,search,create (default all). */
const KINDS = ALL_KINDS.filter((k) =>
  (process.env.AUDIT_TESTS ?? 'read,search,create').split(',').includes(k),
);

/** The autocannon options of each request kind against one server (Patients picked by a stride through all). */
function tests(base: string, token: string, ids: string[]): Record<Kind, Options> {
  const auth = { authorization: `Bearer ${token}` };
  let n = 0;
  const pick = (): string => ids[(n++ * 7919) % ids.length] as string;
  const bodies = ids.slice(0, 500).map((id, i) => JSON.stringify(observation(id, i)));
  let b = 0;
  return {
    read: {
      url: base,
      headers: auth,
      requests: [{ method: 'GET', setupRequest: (r) => ({ ...r, path: `/fhir/R4/Patient/${pick()}` }) }],
    },
    search: {
      url: base,
      headers: auth,
      requests: [
        {
          method: 'GET',
          setupRequest: (r) => ({ ...r, path: `/fhir/R4/Observation?subject=Patient/${pick()}&_count=10` }),
        },
      ],
    },
    create: {
      url: base,
      headers: { ...auth, 'content-type': 'application/fhir+json' },
      requests: [
        {
          method: 'POST',
          path: '/fhir/R4/Observation',
          setupRequest: (r) => ({ ...r, body: bodies[b++ % bodies.length] as string }),
        },
      ],
    },
  };
}

interface Target {
  audit: boolean;
  db: string;
  url: string;
  server: RunningServer;
  tests: Record<Kind, Options>;
  /** Requests autocannon completed / sent (sent ones may still be in flight when a run ends). */
  completed: number;
  sent: number;
  runs: Record<Kind, Measured[]>;
}

const TICK_MS = 10; // USER_HZ: /proc times are in hundredths of a second on Linux

/** CPU time (user + system, in clock ticks) of a process so far; 0 when it is gone. */
function ticks(pid: number): number {
  try {
    // After the command's closing parenthesis: state is field 3, utime and stime are 14 and 15.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

/** CPU ticks so far of the server process and of each PostgreSQL backend connected to its database (by pid). */
async function cpu(t: Target): Promise<{ server: number; backends: Map<number, number> }> {
  const pids = await query<{ pid: number }>(
    ADMIN_URL,
    `SELECT pid FROM pg_stat_activity WHERE datname = '${t.db}'`,
  );
  return { server: ticks(t.server.pid), backends: new Map(pids.map((p) => [p.pid, ticks(p.pid)])) };
}

interface Measured {
  result: Result;
  /** CPU ms per answered request: the server's, and its database backends'. */
  serverCpuMs: number;
  dbCpuMs: number;
}

async function run(t: Target, kind: Kind, duration: number, settle = true): Promise<Measured> {
  const before = await cpu(t);
  const r = await autocannon({
    connections: CONNECTIONS,
    duration,
    ...(RATE ? { overallRate: RATE } : {}),
    ...t.tests[kind],
  });
  // The reads' AuditEvents are inserted up to a second later: their work belongs to this run (both servers wait).
  if (settle) await new Promise((res) => setTimeout(res, 1200));
  const after = await cpu(t);
  t.completed += r.requests.total;
  t.sent += r.requests.sent;
  if (r.non2xx + r.errors > 0)
    throw new Error(`${kind} (audit ${t.audit ? 'on' : 'off'}): ${r.non2xx} non-2xx, ${r.errors} errors`);
  let db = 0;
  for (const [pid, n] of after.backends) db += n - (before.backends.get(pid) ?? 0);
  const per = (n: number): number => (n * TICK_MS) / Math.max(1, r.requests.total);
  return { result: r, serverCpuMs: per(after.server - before.server), dbCpuMs: per(db) };
}

async function query<T>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

const countRows = async (url: string): Promise<number> =>
  Number((await query<{ n: string }>(url, 'SELECT count(*) AS n FROM audit_events'))[0]?.n);

/** Waits until the buffered AuditEvents (stored within one second) are in the table: the count holds still. */
async function settled(url: string): Promise<number> {
  let last = -1;
  for (;;) {
    await new Promise((r) => setTimeout(r, 1500));
    const n = await countRows(url);
    if (n === last) return n;
    last = n;
  }
}

export interface AuditBenchKind {
  kind: Kind;
  onReqPerSec: number;
  offReqPerSec: number;
  /** on / off of the medians. */
  ratio: number;
  /** The median of each round's on / off (the two runs next to each other in time: steadier on a busy machine). */
  pairedRatio: number;
  onP99: number;
  offP99: number;
  /** CPU ms per request (medians): the server process, its PostgreSQL backends, both. */
  onCpu: { server: number; db: number; total: number };
  offCpu: { server: number; db: number; total: number };
}

export interface AuditBenchResult {
  kinds: AuditBenchKind[];
  /** pg_total_relation_size('audit_events') / rows × 1,000,000, and its split. */
  bytesPerMillion: { total: number; heapAndToast: number; indexes: number };
  meanContent: number;
  rowsDuringRuns: number;
  requestsCompleted: number;
  requestsSent: number;
}

export async function benchAudit(runs: number, duration: number, notes: string[]): Promise<AuditBenchResult> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-bench-audit-'));
  fs.chmodSync(work, 0o755);
  const targets: Target[] = [];
  try {
    for (const audit of [true, false]) {
      const db = `cinder_bench_audit_${audit ? 'on' : 'off'}`;
      const url = await freshDatabase(db);
      const dir = path.join(work, db);
      fs.mkdirSync(dir);
      const server = await startServer(
        { DATABASE_URL: url, DATA_DIR: path.join(dir, 'files') },
        dir,
        { audit },
        CPU_PROF
          ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`, `--cpu-prof-name=${db}.cpuprofile`] }
          : {},
      );
      const target: Target = {
        audit,
        db,
        url,
        server,
        tests: {} as Record<Kind, Options>,
        completed: 0,
        sent: 0,
        runs: { read: [], search: [], create: [] },
      };
      targets.push(target);
      const token = await login(server.base);
      const started = Date.now();
      const ids = await load(server.base, token);
      notes.push(
        `audit: audit ${audit ? 'on ' : 'off'}: loaded ${PATIENTS} Patients and ${PATIENTS * OBS} Observations ` +
          `in ${((Date.now() - started) / 1000).toFixed(1)} s (batch Bundles of ${BATCH}, ${LOADERS} clients)`,
      );
      target.tests = tests(server.base, token, ids);
    }
    const [on, off] = targets as [Target, Target];
    const setupRows = await settled(on.url);
    for (const kind of KINDS) for (const t of targets) await run(t, kind, WARMUP, false);
    for (let i = 0; i < runs; i++) {
      for (const kind of KINDS) {
        const order = i % 2 === 0 ? [on, off] : [off, on];
        for (const t of order) t.runs[kind].push(await run(t, kind, duration));
      }
    }
    const rows = await settled(on.url);
    const offRows = await countRows(off.url);
    const during = rows - setupRows;
    const kinds = KINDS.map((kind): AuditBenchKind => {
      const a = median(on.runs[kind].map((r) => r.result.requests.average));
      const b = median(off.runs[kind].map((r) => r.result.requests.average));
      const cpuOf = (t: Target) => ({
        server: median(t.runs[kind].map((r) => r.serverCpuMs)),
        db: median(t.runs[kind].map((r) => r.dbCpuMs)),
        total: median(t.runs[kind].map((r) => r.serverCpuMs + r.dbCpuMs)),
      });
      return {
        kind,
        onReqPerSec: Math.round(a),
        offReqPerSec: Math.round(b),
        ratio: a / b,
        pairedRatio: median(
          on.runs[kind].map(
            (r, i) => r.result.requests.average / (off.runs[kind][i] as Measured).result.requests.average,
          ),
        ),
        onCpu: cpuOf(on),
        offCpu: cpuOf(off),
        onP99: median(on.runs[kind].map((r) => r.result.latency.p99)),
        offP99: median(off.runs[kind].map((r) => r.result.latency.p99)),
      };
    });

    const client = new pg.Client({ connectionString: on.url });
    await client.connect();
    let size: { total: number; table: number; heap: number; indexes: number; rows: number; content: number };
    let perKind: { kind: string; rows: string; content: string }[];
    try {
      await client.query('VACUUM ANALYZE audit_events');
      const s = (
        await client.query(`SELECT pg_total_relation_size('audit_events') AS total,
          pg_table_size('audit_events') AS "table", pg_relation_size('audit_events') AS heap,
          pg_indexes_size('audit_events') AS indexes, count(*) AS rows, avg(length(content)) AS content
          FROM audit_events`)
      ).rows[0] as Record<string, string>;
      size = {
        total: Number(s.total),
        table: Number(s.table),
        heap: Number(s.heap),
        indexes: Number(s.indexes),
        rows: Number(s.rows),
        content: Number(s.content),
      };
      perKind = (
        await client.query(`SELECT split_part(subtype[1], '|', 2) AS kind, count(*) AS rows,
          round(avg(length(content))) AS content FROM audit_events GROUP BY 1 ORDER BY 2 DESC`)
      ).rows as typeof perKind;
    } finally {
      await client.end();
    }
    const perMillion = (bytes: number): number => Math.round((bytes / size.rows) * 1e6);
    const bytesPerMillion = {
      total: perMillion(size.total),
      heapAndToast: perMillion(size.table),
      indexes: perMillion(size.indexes),
    };

    console.log(
      `\nAudit cost: audit on vs off, ${CONNECTIONS} connections, ${runs} interleaved rounds of ${duration} s ` +
        `(after a ${WARMUP} s warm-up each)${RATE ? `, at ${RATE} req/s in all` : ', as fast as answered'}, medians; ${PATIENTS} Patients, ${PATIENTS * OBS} Observations; ` +
        `PostgreSQL, ${os.cpus().length} CPUs (load average ${os.loadavg()[0]?.toFixed(1)}), Node ${process.version}\n`,
    );
    console.table(
      kinds.map((k) => ({
        test: {
          read: 'read Patient/<id>',
          search: 'search Observation?subject=&_count=10',
          create: 'create Observation',
        }[k.kind],
        'req/s on': k.onReqPerSec,
        'req/s off': k.offReqPerSec,
        'on/off': k.ratio.toFixed(3),
        'on/off paired': k.pairedRatio.toFixed(3),
        'p99 ms on': k.onP99,
        'p99 ms off': k.offP99,
        'runs on (req/s)': on.runs[k.kind].map((r) => Math.round(r.result.requests.average)).join(' '),
        'runs off (req/s)': off.runs[k.kind].map((r) => Math.round(r.result.requests.average)).join(' '),
      })),
    );
    console.log('CPU time per request (ms, medians; Node = the server process, PG = its database backends):');
    console.table(
      kinds.map((k) => ({
        test: k.kind,
        'Node on': +k.onCpu.server.toFixed(3),
        'Node off': +k.offCpu.server.toFixed(3),
        'PG on': +k.onCpu.db.toFixed(3),
        'PG off': +k.offCpu.db.toFixed(3),
        'total on': +k.onCpu.total.toFixed(3),
        'total off': +k.offCpu.total.toFixed(3),
        'CPU on/off': (k.onCpu.total / k.offCpu.total).toFixed(3),
      })),
    );
    const mb = (n: number): string => `${(n / 1e6).toFixed(1)} MB`;
    console.table([
      {
        rows: size.rows,
        'total MB': +(size.total / 1e6).toFixed(1),
        'heap+TOAST MB': +(size.table / 1e6).toFixed(1),
        'of which heap MB': +(size.heap / 1e6).toFixed(1),
        'indexes MB': +(size.indexes / 1e6).toFixed(1),
        'per million: total GB': +(bytesPerMillion.total / 1e9).toFixed(2),
        'heap+TOAST GB': +(bytesPerMillion.heapAndToast / 1e9).toFixed(2),
        'indexes GB': +(bytesPerMillion.indexes / 1e9).toFixed(2),
        'mean content B': Math.round(size.content),
      },
    ]);
    console.table(
      perKind.map((k) => ({
        interaction: k.kind,
        rows: Number(k.rows),
        'mean content B': Number(k.content),
      })),
    );
    notes.push(
      `audit: on/off req/s ${kinds.map((k) => `${k.kind} ${k.ratio.toFixed(2)} (${k.onReqPerSec}/${k.offReqPerSec}; paired ${k.pairedRatio.toFixed(2)}; CPU per request ×${(k.onCpu.total / k.offCpu.total).toFixed(2)})`).join(', ')}; ` +
        `audit_events grows ${mb(bytesPerMillion.total)} per million audited requests (heap+TOAST ` +
        `${mb(bytesPerMillion.heapAndToast)}, indexes ${mb(bytesPerMillion.indexes)}; mean AuditEvent ` +
        `${Math.round(size.content)} characters) — ${CONNECTIONS} connections, medians of ${runs} interleaved runs of ${duration} s`,
    );
    const sentOn = on.sent;
    const completedOn = on.completed;
    const check =
      during >= completedOn && during <= sentOn
        ? `every request made one row`
        : `WARNING: rows do not match the requests`;
    notes.push(
      `audit: ${during} rows written during the runs for ${completedOn} requests answered (${sentOn} sent, ` +
        `the rest in flight when a run ended); ${setupRows} rows before (logins, loading batches): ${check}`,
    );
    if (during < completedOn || during > sentOn)
      console.warn(`WARNING: ${during} audit rows for ${completedOn}..${sentOn} requests during the runs`);
    if (offRows !== 0) notes.push(`audit: WARNING: ${offRows} rows in the audit-off server's table`);
    return {
      kinds,
      bytesPerMillion,
      meanContent: size.content,
      rowsDuringRuns: during,
      requestsCompleted: completedOn,
      requestsSent: sentOn,
    };
  } finally {
    for (const t of targets) {
      await t.server.stop();
      await dropDatabase(t.db).catch(() => undefined);
    }
    fs.rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) {
  const notes: string[] = [];
  benchAudit(Number(process.env.AUDIT_RUNS ?? 5), Number(process.env.BENCH_DURATION ?? 5), notes)
    .then(() => notes.forEach((n) => console.log(`- ${n}`)))
    .catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
}
