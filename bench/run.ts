// npm run bench: loads 10,000 Patients (batch Bundles of 100) and the 88 Synthea transaction Bundles, then measures
// read by id, search by family and create over loopback with autocannon (10 connections), on each embedded engine
// of BENCH_EMBEDDED and on PostgreSQL (when BENCH_DATABASE_URL or the local server is reachable; BENCH_POSTGRES=0
// skips it), with each engine's start time and memory (idle, peak). Figures are medians of 3 runs, with
// the ratio to /healthcheck (one SELECT 1) measured in the same go as a baseline; peak RSS is the server's VmHWM.
// On PostgreSQL it then times bulk $export of 100,000 Patients and cancel-to-stop (bench/export.ts; BENCH_EXPORT=0 skips),
// and CSV: `$csv` of 1000 Patients with 2 connections, and the CSV bulk export (bench/csv.ts; BENCH_CSV=0 skips),
// and subscriptions: create req/s with 100 subscriptions that do not match, notifications/s and latency with 100 that
// do (bench/subscriptions.ts; BENCH_SUBSCRIPTIONS=0 skips), terminology: $expand of a stored 10,000-concept value
// set, first and repeated, and $validate-code (bench/terminology.ts; BENCH_TERMINOLOGY=0 skips), and profile
// validation: US Core in process and a 100-patient transaction through HTTP with and without meta.profile
// (bench/validation.ts; BENCH_VALIDATION=0 skips), and auditing: read, search and create req/s and CPU time per request
// with auditing on and off (two servers on the same data, interleaved runs), and the audit table's growth per million
// requests (bench/audit.ts; BENCH_AUDIT=0 skips; AUDIT_RUNS rounds, default 5), and `$lastn` latency for Patients with
// 10, 100, 1,000 and 10,000 Observations, as ratios to the smallest (bench/lastn.ts; BENCH_LASTN=0 skips), and the
// database's bytes per resource per table after the request benchmarks (bench/storage-size.ts; BENCH_STORAGE=0 skips).
// Cluster mode: 1 vs 2 worker processes, read, search and create req/s and where the CPU goes (bench/cluster.ts;
// BENCH_CLUSTER=0 skips).
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import autocannon from 'autocannon';
import pg from 'pg';
import { families, makePatient } from './patients.js';
import { startMockIdp, type MockIdp } from '../test/support/mock-idp.js';
import { benchCsvExport, benchCsvRequests } from './csv.js';
import { benchExport } from './export.js';
import { benchViewExport } from './views.js';
import { benchSubscriptions } from './subscriptions.js';
import { benchAudit } from './audit.js';
import { benchLastn } from './lastn.js';
import { benchCluster } from './cluster.js';
import { benchTerminology } from './terminology.js';
import { benchValidation } from './validation.js';
import { login, startServer, type RunningServer } from './server.js';
import { storageReport } from './storage-size.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const CONNECTIONS = 10;
const PATIENTS = Number(process.env.BENCH_PATIENTS ?? 10_000);
/**
 * The embedded engines to measure (config `embeddedEngine`), comma-separated: `postgres` (the default: PostgreSQL
 * binaries from npm), `pglite` (PGlite on the event loop), `pglite-worker` (PGlite in a worker thread).
 */
const EMBEDDED = (process.env.BENCH_EMBEDDED ?? 'postgres,pglite').split(',').filter(Boolean);
/** Concurrent clients loading Bundles (both cores of the machine work; a single client leaves one idle). */
const LOADERS = Number(process.env.BENCH_LOADERS ?? 4);

async function inParallel<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    }),
  );
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

interface Row {
  engine: string;
  test: string;
  reqPerSec: number;
  p50: number;
  p99: number;
  ratio?: string;
  errors: number;
}

async function loadPatients(base: string, token: string): Promise<{ ids: string[]; perSec: number }> {
  const ids: string[] = [];
  const started = performance.now();
  const starts = Array.from({ length: Math.ceil(PATIENTS / 100) }, (_, k) => k * 100);
  await inParallel(starts, LOADERS, async (i) => {
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
    const body = (await res.json()) as { entry: { response: { status: string; location?: string } }[] };
    for (const e of body.entry) {
      if (!e.response.status.startsWith('201'))
        throw new Error(`batch entry failed: ${JSON.stringify(e.response)}`);
      ids.push((e.response.location as string).split('/')[1] as string);
    }
  });
  return { ids, perSec: PATIENTS / ((performance.now() - started) / 1000) };
}

async function loadSynthea(base: string, token: string): Promise<{ resources: number; seconds: number }> {
  const dir = path.resolve('../shared/data/synthea-r4');
  const files = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.json.gz'))
    .sort();
  const bodies = files.map((f) => zlib.gunzipSync(fs.readFileSync(path.join(dir, f))).toString('utf8'));
  let resources = 0;
  const started = performance.now();
  await inParallel(bodies, LOADERS, async (body) => {
    const res = await fetch(`${base}fhir/R4`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
      body,
    });
    if (!res.ok) throw new Error(`transaction failed ${res.status} ${(await res.text()).slice(0, 300)}`);
    // Read first, then add: `x += await y` would add to a stale x when loaders run concurrently.
    const n = ((await res.json()) as { entry: unknown[] }).entry.length;
    resources += n;
  });
  return { resources, seconds: (performance.now() - started) / 1000 };
}

async function measure(name: string, opts: Parameters<typeof autocannon>[0]): Promise<Omit<Row, 'engine'>> {
  const runs = [];
  for (let i = 0; i < RUNS; i++)
    runs.push(await autocannon({ connections: CONNECTIONS, duration: DURATION, ...opts }));
  return {
    test: name,
    reqPerSec: Math.round(median(runs.map((r) => r.requests.average))),
    p50: median(runs.map((r) => r.latency.p50)),
    p99: median(runs.map((r) => r.latency.p99)),
    errors: runs.reduce((n, r) => n + r.non2xx + r.errors, 0),
  };
}

/** An external user (invited with an externalId) and a JWT of the mock identity provider for it. */
async function externalUser(base: string, token: string, idp: MockIdp): Promise<string> {
  const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' };
  const project = (await (
    await fetch(`${base}fhir/R4/Project`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ resourceType: 'Project', name: 'Bench external' }),
    })
  ).json()) as { id: string };
  const res = await fetch(`${base}admin/projects/${project.id}/invite`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({
      resourceType: 'Practitioner',
      firstName: 'Ext',
      lastName: 'User',
      externalId: `bench|${project.id}`,
    }),
  });
  if (!res.ok) throw new Error(`invite failed ${res.status}`);
  return idp.token({ sub: `bench|${project.id}` });
}

async function benchEngine(
  engine: string,
  server: RunningServer,
  rows: Row[],
  notes: string[],
  idp: MockIdp,
): Promise<void> {
  const idleMb = server.treeMb();
  let peakTreeMb = idleMb;
  const sampler = setInterval(() => (peakTreeMb = Math.max(peakTreeMb, server.treeMb())), 500);
  try {
    await benchRequests(engine, server, rows, notes, idp);
  } finally {
    clearInterval(sampler);
  }
  memory.push({
    engine,
    'start s': Number(server.startSeconds.toFixed(2)),
    'idle MB (PSS, with children)': idleMb,
    'peak MB (PSS, with children)': peakTreeMb,
    'peak RSS MB (Node process)': server.peakRssMb(),
  });
}

interface MemoryRow {
  engine: string;
  'start s': number;
  'idle MB (PSS, with children)': number;
  'peak MB (PSS, with children)': number;
  'peak RSS MB (Node process)': number;
}
const memory: MemoryRow[] = [];

async function benchRequests(
  engine: string,
  server: RunningServer,
  rows: Row[],
  notes: string[],
  idp: MockIdp,
): Promise<void> {
  const base = server.base;
  const token = await login(base);
  const auth = { authorization: `Bearer ${token}` };
  const loaded = await loadPatients(base, token);
  notes.push(
    `${engine}: loaded ${PATIENTS} Patients in batch Bundles of 100 at ${Math.round(loaded.perSec)} resources/s (${LOADERS} concurrent clients)`,
  );
  const synthea = await loadSynthea(base, token);
  notes.push(
    `${engine}: loaded 88 Synthea transaction Bundles (${synthea.resources} resources) in ${synthea.seconds.toFixed(1)} s = ${Math.round(synthea.resources / synthea.seconds)} resources/s (${LOADERS} concurrent clients)`,
  );
  const ids = loaded.ids;
  let n = 0;
  const fams = families();
  const baseline = await measure('healthcheck (baseline)', { url: `${base}healthcheck` });
  const tests: Omit<Row, 'engine'>[] = [
    await measure('read Patient by id', {
      url: base,
      headers: auth,
      requests: [
        { method: 'GET', setupRequest: (r) => ({ ...r, path: `/fhir/R4/Patient/${ids[n++ % ids.length]}` }) },
      ],
    }),
    await measure('search Patient?family=&_count=20', {
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
    await measure('create Patient', {
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
  ];
  // External identity provider tokens (issue 3): cached userinfo, and a read with the external token itself.
  const external = await externalUser(base, token, idp);
  const extAuth = { authorization: `Bearer ${external}` };
  const externalProject = (await (await fetch(`${base}oauth2/userinfo`, { headers: extAuth })).json()) as {
    access_token: string;
  };
  const own = `Bearer ${externalProject.access_token}`;
  const created = (await (
    await fetch(`${base}fhir/R4/Patient`, {
      method: 'POST',
      headers: { authorization: own, 'content-type': 'application/fhir+json' },
      body: JSON.stringify(makePatient(1)),
    })
  ).json()) as { id: string };
  const callsBefore = idp.calls;
  tests.push(
    await measure('userinfo, cached external token', { url: `${base}oauth2/userinfo`, headers: extAuth }),
  );
  tests.push(
    await measure('read Patient, external token', {
      url: `${base}fhir/R4/Patient/${created.id}`,
      headers: extAuth,
    }),
  );
  tests.push(
    await measure('read Patient, service token (same)', {
      url: `${base}fhir/R4/Patient/${created.id}`,
      headers: { authorization: own },
    }),
  );
  notes.push(
    `${engine}: identity provider userinfo calls during the external-token runs: ${idp.calls - callsBefore}`,
  );
  if (engine === 'postgres' && process.env.BENCH_CSV !== '0') {
    const csv = await benchCsvRequests(server, token, RUNS, DURATION);
    tests.push({ test: '$csv 1000 Patients, 6 fields (2 connections)', ...csv });
  }
  rows.push({ engine, ...baseline, ratio: '1.00' });
  for (const t of tests) rows.push({ engine, ...t, ratio: (t.reqPerSec / baseline.reqPerSec).toFixed(2) });
}

/**
 * The hot paths' ratios to the healthcheck per engine against issue 30's goals (read ≥ 0.8, search and create ≥ 0.25 on
 * PostgreSQL), and the embedded default's peak memory (Node and PostgreSQL together) against its goal of 350 MB.
 */
function hotPathSummary(rows: Row[], mem: MemoryRow[]): string {
  const goals: [string, string, number][] = [
    ['read', 'read Patient by id', 0.8],
    ['search', 'search Patient?family=&_count=20', 0.25],
    ['create', 'create Patient', 0.25],
  ];
  const lines = [...new Set(rows.map((r) => r.engine))].map((engine) => {
    const ratios = goals.map(([name, test, goal]) => {
      const ratio = rows.find((r) => r.engine === engine && r.test === test)?.ratio ?? '-';
      return `${name} ${ratio}${Number(ratio) >= goal ? '' : ` (goal ${goal})`}`;
    });
    const peak = mem.find((m) => m.engine === engine)?.['peak MB (PSS, with children)'];
    const memGoal = engine === 'embedded postgres' && peak !== undefined && peak > 350 ? ' (goal 350)' : '';
    return `  ${engine}: ${ratios.join(', ')}; peak ${peak ?? '-'} MB${memGoal}`;
  });
  return `Hot paths, × healthcheck of the same run (goals: read 0.8, search and create 0.25 on PostgreSQL; embedded peak 350 MB):\n${lines.join('\n')}`;
}

async function main(): Promise<void> {
  execSync('npm run build', { stdio: 'inherit' });
  const rows: Row[] = [];
  const notes: string[] = [];
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-bench-'));
  // The embedded PostgreSQL of a server run as root runs as another user, who must reach the data directories.
  fs.chmodSync(work, 0o755);
  const idp = await startMockIdp();
  const providers = { externalAuthProviders: [{ issuer: idp.issuer, userInfoUrl: idp.userInfoUrl }] };
  try {
    // Each embedded engine on its own data directory, loaded with the same data.
    for (const engine of EMBEDDED) {
      const embedded = await startServer(
        { DATA_DIR: path.join(work, `data-${engine}`), EMBEDDED_ENGINE: engine },
        work,
        providers,
      );
      try {
        await benchEngine(`embedded ${engine}`, embedded, rows, notes, idp);
      } finally {
        await embedded.stop();
      }
    }
    const adminUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
    const client = new pg.Client({ connectionString: adminUrl });
    let pgUrl: string | undefined;
    try {
      await client.connect();
      await client.query('DROP DATABASE IF EXISTS cinder_bench WITH (FORCE)');
      await client.query('CREATE DATABASE cinder_bench');
      const u = new URL(adminUrl);
      u.pathname = '/cinder_bench';
      pgUrl = u.toString();
    } catch (err) {
      notes.push(`PostgreSQL not benchmarked: ${(err as Error).message}`);
    } finally {
      await client.end().catch(() => undefined);
    }
    if (pgUrl && process.env.BENCH_POSTGRES !== '0') {
      const server = await startServer(
        { DATABASE_URL: pgUrl, DATA_DIR: path.join(work, 'pg-files') },
        work,
        providers,
      );
      try {
        await benchEngine('postgres', server, rows, notes, idp);
        // Bytes per resource per table (bench/storage-size.ts), of the Patients, Synthea and creates loaded so far.
        if (process.env.BENCH_STORAGE !== '0')
          notes.push(
            `postgres: ${await storageReport(pgUrl, 'analyze', 'bytes per resource after the loads above')}`,
          );
        if (process.env.BENCH_EXPORT !== '0')
          await benchExport(server, await login(server.base), pgUrl, RUNS, notes);
        if (process.env.BENCH_CSV !== '0')
          await benchCsvExport(server, await login(server.base), RUNS, notes);
        if (process.env.BENCH_VIEWS !== '0')
          await benchViewExport(server, await login(server.base), RUNS, notes);
        if (process.env.BENCH_SUBSCRIPTIONS !== '0') await benchSubscriptions(RUNS, DURATION, notes);
        if (process.env.BENCH_TERMINOLOGY !== '0') await benchTerminology(RUNS, notes);
        if (process.env.BENCH_AUDIT !== '0')
          await benchAudit(Number(process.env.AUDIT_RUNS ?? 5), DURATION, notes);
        if (process.env.BENCH_LASTN !== '0') await benchLastn(notes);
      } finally {
        await server.stop();
      }
    }
    if (process.env.BENCH_CLUSTER !== '0')
      await benchCluster(Number(process.env.CLUSTER_RUNS ?? 5), DURATION, notes);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
    await idp.close();
  }
  console.log(
    `\nCinder benchmark: ${CONNECTIONS} connections, ${RUNS} runs of ${DURATION} s each (medians), ${os.cpus().length} CPUs, Node ${process.version}\n`,
  );
  console.table(
    rows.map((r) => ({
      engine: r.engine,
      test: r.test,
      'req/s': r.reqPerSec,
      'p50 ms': r.p50,
      'p99 ms': r.p99,
      'x baseline': r.ratio,
      'non-2xx/errors': r.errors,
    })),
  );
  console.table(memory);
  console.log(hotPathSummary(rows, memory));
  for (const n of notes) console.log(`- ${n}`);
  if (process.env.BENCH_VALIDATION !== '0') await benchValidation();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
