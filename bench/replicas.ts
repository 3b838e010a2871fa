// Read replicas (config databaseReadUrls): search throughput of one server whose reads go to a PostgreSQL streaming
// replica, against one server on the primary only, on the same data in the same run (rounds interleaved).
//
//   scripts/test-replica.sh && npm run build && npx tsx bench/replicas.ts
//
// Environment: BENCH_DATABASE_URL (the primary's `postgres` database, default postgres://postgres@127.0.0.1:5432/
// postgres), BENCH_REPLICA_URL (the replica's, default port 5433 of the same host), REPLICA_ROUNDS (default 5),
// REPLICA_DURATION (seconds per run, default 5), REPLICA_PATIENTS (default 200, 20 Observations each).
//
// On one machine the replica shares the cores of the primary and of both servers: the ratio shows what routing
// costs (the choice per request, the write positions, a second pool), not what a replica on its own machine adds.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { batch, dropDatabase, freshDatabase, login, quantityObservation, startServer } from './server.js';

const ROUNDS = Number(process.env.REPLICA_ROUNDS ?? 5);
const DURATION = Number(process.env.REPLICA_DURATION ?? 5);
const PATIENTS = Number(process.env.REPLICA_PATIENTS ?? 200);
const OBSERVATIONS = 20;
const CONNECTIONS = 10;
const DB_NAME = 'cinder_bench_replicas';
const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REPLICA_ADMIN_URL =
  process.env.BENCH_REPLICA_URL ??
  (() => {
    const u = new URL(ADMIN_URL);
    u.port = '5433';
    return u.toString();
  })();

const withDb = (url: string, name: string): string => {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
};

async function one<T>(url: string, sql: string): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(sql)).rows[0] as T;
  } finally {
    await c.end();
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

/** Index scans the replica has made in the bench database (its own queries' statistics). */
const replicaScans = async (url: string): Promise<number> =>
  Number(
    (
      await one<{ n: string }>(
        url,
        'SELECT coalesce(sum(coalesce(idx_scan, 0) + seq_scan), 0) AS n FROM pg_stat_user_tables',
      )
    ).n,
  );

async function main(): Promise<void> {
  if ((await one<{ r: boolean }>(REPLICA_ADMIN_URL, 'SELECT pg_is_in_recovery() AS r')).r !== true)
    throw new Error(`${REPLICA_ADMIN_URL} is not a streaming replica (scripts/test-replica.sh makes one)`);
  const primary = await freshDatabase(DB_NAME);
  const replica = withDb(REPLICA_ADMIN_URL, DB_NAME);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-bench-replicas-'));
  const dirs = ['p', 'r'].map(
    (d) => fs.mkdirSync(path.join(work, d), { recursive: true }) ?? path.join(work, d),
  );
  const quiet = fs.openSync('/dev/null', 'w');
  const env = { DATABASE_URL: primary, JOB_CONCURRENCY: '0', REQUEST_LOG: 'none' };
  const onPrimary = await startServer(env, dirs[0] as string, { audit: false }, { stdout: quiet });
  const onReplica = await startServer(
    { ...env, DATABASE_READ_URLS: replica },
    dirs[1] as string,
    { audit: false },
    { stdout: quiet },
  );
  try {
    const token = await login(onPrimary.base);
    const patients: string[] = [];
    for (let i = 0; i < PATIENTS; i += 100) {
      const n = Math.min(100, PATIENTS - i);
      patients.push(
        ...(await batch(
          onPrimary.base,
          token,
          Array.from({ length: n }, (_, k) => ({ resourceType: 'Patient', name: [{ family: `R${i + k}` }] })),
        )),
      );
    }
    for (let i = 0; i < patients.length; i += 5) {
      await batch(
        onPrimary.base,
        token,
        patients.slice(i, i + 5).flatMap((p) =>
          Array.from({ length: OBSERVATIONS }, (_, k) =>
            quantityObservation({
              patientId: p,
              coding: ['8867-4', 'Heart rate', '/min', 70],
              category: 'vital-signs',
              effective: new Date(Date.UTC(2024, 0, 1 + k)).toISOString(),
              factor: 1 + (k % 7) / 20,
            }),
          ),
        ),
      );
    }
    await one(primary, 'ANALYZE');
    // Wait for the replica to replay the load (and the ANALYZE).
    const target = (await one<{ l: string }>(primary, 'SELECT pg_current_wal_lsn()::text AS l')).l;
    for (;;) {
      const r = await one<{ ok: boolean }>(
        replica,
        `SELECT pg_last_wal_replay_lsn() >= '${target}'::pg_lsn AS ok`,
      );
      if (r.ok) break;
      await new Promise((res) => setTimeout(res, 200));
    }
    // Each server's own login, which wrote nothing: its reads may all go to the replica.
    const tokens = [await login(onPrimary.base), await login(onReplica.base)];
    const servers = [onPrimary, onReplica];
    const rates: [number[], number[]] = [[], []];
    const p50: [number[], number[]] = [[], []];
    let stride = 0;
    const runOnce = async (i: 0 | 1): Promise<void> => {
      const base = (servers[i] as { base: string }).base;
      const r = await autocannon({
        url: base,
        connections: CONNECTIONS,
        duration: DURATION,
        headers: { authorization: `Bearer ${tokens[i] as string}` },
        requests: [
          {
            method: 'GET',
            setupRequest: (req) => ({
              ...req,
              path: `/fhir/R4/Observation?subject=Patient/${patients[stride++ % patients.length] as string}&_count=10`,
            }),
          },
        ],
      });
      if (r.non2xx + r.errors > 0) throw new Error(`${r.non2xx} non-2xx, ${r.errors} errors`);
      rates[i].push(r.requests.average);
      p50[i].push(r.latency.p50);
    };
    // Warm both, then interleave (the order alternates each round).
    await runOnce(0);
    await runOnce(1);
    rates[0].length = rates[1].length = p50[0].length = p50[1].length = 0;
    const scansBefore = await replicaScans(replica);
    for (let round = 0; round < ROUNDS; round++) {
      if (round % 2 === 0) {
        await runOnce(0);
        await runOnce(1);
      } else {
        await runOnce(1);
        await runOnce(0);
      }
    }
    await new Promise((res) => setTimeout(res, 1500));
    const scans = (await replicaScans(replica)) - scansBefore;
    const [pr, rr] = [median(rates[0]), median(rates[1])];
    console.log(
      `read replicas: search Observation?subject=&_count=10, ${CONNECTIONS} connections, ${ROUNDS} interleaved rounds of ${DURATION} s, ` +
        `${PATIENTS} Patients × ${OBSERVATIONS} Observations; ${os.cpus().length} CPUs, load average ${os.loadavg()[0]?.toFixed(1)}`,
    );
    console.log(`  primary only:   ${pr.toFixed(0)} req/s (median), p50 ${median(p50[0]).toFixed(1)} ms`);
    console.log(`  via replica:    ${rr.toFixed(0)} req/s (median), p50 ${median(p50[1]).toFixed(1)} ms`);
    console.log(`  ratio replica / primary-only: ${(rr / pr).toFixed(2)}`);
    console.log(
      `  every run (req/s): primary ${rates[0].map((x) => x.toFixed(0)).join(', ')}; replica ${rates[1].map((x) => x.toFixed(0)).join(', ')}`,
    );
    console.log(`  replica scans during the runs: ${scans} (its own statistics: the reads did go there)`);
  } finally {
    await onReplica.stop();
    await onPrimary.stop();
    fs.closeSync(quiet);
    fs.rmSync(work, { recursive: true, force: true });
    if (process.env.REPLICA_KEEP !== '1') await dropDatabase(DB_NAME);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
