// What metrics cost on the hot read path (issue 30 point 5): two built servers on PostgreSQL, one without metrics (the
// default) and one with `metricsToken` set and scraped every SCRAPE_MS meanwhile, each with the same Patients; read by
// id with autocannon (10 connections), the two servers in turn in each of BENCH_RUNS rounds, medians; the ratio
// on/off is the figure. Then, in this process, the cost of recording one request and one database statement.
//
//   npm run build && npx tsx bench/metrics.ts
//
// Environment (all optional): BENCH_RUNS (5), BENCH_DURATION seconds (5), BENCH_PATIENTS (2000), SCRAPE_MS (5000),
// BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/postgres), BENCH_HTTP=0 (the in-process figures only).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { makePatient } from './patients.js';
import { dropDatabase, freshDatabase, login, startServer, type RunningServer } from './server.js';
import { createMetrics } from '../src/metrics/metrics.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const PATIENTS = Number(process.env.BENCH_PATIENTS ?? 2000);
const SCRAPE_MS = Number(process.env.SCRAPE_MS ?? 5000);
const TOKEN = 'bench-metrics-token-0123456789abcdefghij';

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

async function loadPatients(base: string, token: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < PATIENTS; i += 100) {
    const entry = Array.from({ length: Math.min(100, PATIENTS - i) }, (_, k) => ({
      resource: makePatient(i + k),
      request: { method: 'POST', url: 'Patient' },
    }));
    const res = await fetch(`${base}fhir/R4`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
      body: JSON.stringify({ resourceType: 'Bundle', type: 'batch', entry }),
    });
    if (!res.ok) throw new Error(`batch failed ${res.status}`);
    const body = (await res.json()) as { entry: { response: { location: string } }[] };
    for (const e of body.entry) ids.push(e.response.location.split('/')[1] as string);
  }
  return ids;
}

interface Target {
  label: 'off' | 'on';
  server: RunningServer;
  token: string;
  ids: string[];
  rps: number[];
  p50: number[];
  p99: number[];
  errors: number;
}

async function readRound(t: Target): Promise<void> {
  let n = 0;
  const scrapes: string[] = [];
  const scraper =
    t.label === 'on'
      ? setInterval(() => {
          void fetch(`${t.server.base}metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
            .then((r) => r.text())
            .then((x) => scrapes.push(x));
        }, SCRAPE_MS)
      : undefined;
  const r = await autocannon({
    url: t.server.base,
    connections: 10,
    duration: DURATION,
    headers: { authorization: `Bearer ${t.token}` },
    requests: [
      {
        method: 'GET',
        setupRequest: (q) => ({ ...q, path: `/fhir/R4/Patient/${t.ids[n++ % t.ids.length]}` }),
      },
    ],
  });
  clearInterval(scraper);
  t.rps.push(r.requests.average);
  t.p50.push(r.latency.p50);
  t.p99.push(r.latency.p99);
  t.errors += r.non2xx + r.errors;
}

/**
 * CPU nanoseconds per call of `fn` (user + system time of this process, so that other processes' load on the machine
 * does not count), median of 5 batches of `n` calls.
 */
function nsPerCall(n: number, fn: (i: number) => void): number {
  const times: number[] = [];
  for (let b = 0; b < 5; b++) {
    const start = process.cpuUsage();
    for (let i = 0; i < n; i++) fn(i);
    const used = process.cpuUsage(start);
    times.push(((used.user + used.system) * 1000) / n);
  }
  return Math.round(median(times));
}

async function main(): Promise<void> {
  if (process.env.BENCH_HTTP !== '0') await overHttp();
  await inProcess();
}

async function overHttp(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-metrics-bench-'));
  const stdout = fs.openSync('/dev/null', 'a');
  const targets: Target[] = [];
  const load0 = os.loadavg()[0] as number;
  try {
    for (const label of ['off', 'on'] as const) {
      const dir = path.join(work, label);
      fs.mkdirSync(dir);
      const server = await startServer(
        { DATABASE_URL: await freshDatabase(`cinder_metrics_${label}`), DATA_DIR: path.join(dir, 'files') },
        dir,
        { requestLog: 'none', ...(label === 'on' ? { metricsToken: TOKEN } : {}) },
        { stdout },
      );
      const token = await login(server.base);
      targets.push({
        label,
        server,
        token,
        ids: await loadPatients(server.base, token),
        rps: [],
        p50: [],
        p99: [],
        errors: 0,
      });
    }
    for (let round = 0; round < RUNS; round++) {
      // Alternate which goes first, so that neither always follows the other's load.
      const order = round % 2 === 0 ? targets : [...targets].reverse();
      for (const t of order) await readRound(t);
    }
  } finally {
    for (const t of targets) await t.server.stop();
    for (const label of ['off', 'on']) await dropDatabase(`cinder_metrics_${label}`).catch(() => undefined);
    fs.closeSync(stdout);
    fs.rmSync(work, { recursive: true, force: true });
  }
  const rows = targets.map((t) => ({
    metrics: t.label,
    'read req/s': Math.round(median(t.rps)),
    'p50 ms': median(t.p50),
    'p99 ms': median(t.p99),
    errors: t.errors,
  }));
  const [off, on] = rows as [(typeof rows)[number], (typeof rows)[number]];
  console.log(
    `\nmetrics on the read path (PostgreSQL): 10 connections, medians of ${RUNS} × ${DURATION} s, ${PATIENTS} Patients, ` +
      `scrape every ${SCRAPE_MS} ms, ${os.cpus().length} CPUs, load average ${load0.toFixed(1)} → ${(os.loadavg()[0] as number).toFixed(1)}`,
  );
  console.table(rows);
  console.log(`read with metrics / without: ${(on['read req/s'] / off['read req/s']).toFixed(3)}`);
}

async function inProcess(): Promise<void> {
  // In-process: one request recorded (counter + histogram), and one statement timed.
  const m = createMetrics({ processMetrics: false });
  const routes = ['/fhir/R4/:type/:id', '/fhir/R4/:type', '/healthcheck'];
  const request = nsPerCall(1_000_000, (i) => m.request('GET', routes[i % 3], 200, 0.002));
  const db = m.dbObserver('request');
  const statement = nsPerCall(1_000_000, () => db.observe('query', 0.0004, false));
  const scrapeStart = process.cpuUsage();
  await m.scrape();
  const scrapeCpu = process.cpuUsage(scrapeStart);
  console.log(
    `in-process CPU time: ${request} ns to record a request, ${statement} ns to record a statement, ` +
      `${((scrapeCpu.user + scrapeCpu.system) / 1000).toFixed(2)} ms to render a scrape`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
