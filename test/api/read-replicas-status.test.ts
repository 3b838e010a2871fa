// Read replicas seen by operators, and view exports read from them, against a REAL streaming replica of this machine's
// cluster (scripts/test-replica.sh; TEST_REPLICA_URL), in the style of read-replicas.test.ts: /metrics shows each
// replica's state as last probed and follows it when replay is paused and when the replica is stopped; /healthcheck
// counts replicas without naming them and stays 200 while one is down; no answer and no log line holds the replica
// URL's password; a $viewdefinition-export reads its pages on the replica (proved by pausing its replay mid-job: a
// write made then is missing from the output) and holds what was written before its kick-off. Run it alone, never
// beside read-replicas.test.ts (both pause and stop the replica); it leaves the replica running and replaying.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  holdReplica,
  replicaCluster,
  replicaControl,
  run,
  until,
  type ReplicaControl,
} from '../support/replica.js';
import type { JobRow } from '../../src/jobs/queue.js';
import type { Db } from '../../src/storage/db.js';
import { createReadRouter, openReplicas, type ReadRouter } from '../../src/storage/replicas.js';
import { created, startTestApp, type TestApp } from '../support/app.js';
import { openTestPostgres, type TestDatabase } from '../support/db.js';
import { jobIdOf, kickOff, waitForJob } from '../support/jobs.js';

const primaryUrl = process.env.TEST_DATABASE_URL;
const replicaUrl = process.env.TEST_REPLICA_URL;
const METRICS_TOKEN = `metrics-${randomBytes(24).toString('hex')}`;

/** The value of one series of a scrape (`undefined`: absent). */
function sample(text: string, name: string, replica: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{replica="${replica}"} `));
  if (line === undefined) return undefined;
  const v = line.slice(line.lastIndexOf(' ') + 1);
  return v === '+Inf' ? Infinity : Number(v);
}

describe.skipIf(!primaryUrl || !replicaUrl)(
  'read replica status and view exports (needs TEST_DATABASE_URL and TEST_REPLICA_URL: scripts/test-replica.sh)',
  () => {
    const schema = `t_${randomBytes(6).toString('hex')}`;
    // The replica's URL with a password (the test clusters trust local connections, so it is never asked for; a
    // configured one is kept): the password must appear in no answer and no log line.
    // (The describe's body runs even when it is skipped: without TEST_REPLICA_URL a placeholder.)
    const secretUrl = new URL(replicaUrl ?? 'postgres://127.0.0.1:5433/test');
    if (!secretUrl.password) {
      secretUrl.username ||= 'postgres';
      secretUrl.password = `Pw${randomBytes(9).toString('hex')}`;
    }
    const password = decodeURIComponent(secretUrl.password);
    const replicaHost = secretUrl.hostname;
    /** The replica's label: host:port/database. */
    const label = `${secretUrl.hostname}:${secretUrl.port || '5432'}${secretUrl.pathname}`;
    const logLines: string[] = [];
    const log = {
      warn: (o: object, m: string) => void logLines.push(JSON.stringify({ ...o, msg: m })),
      info: (o: object, m: string) => void logLines.push(JSON.stringify({ ...o, msg: m })),
    };
    let db: Db;
    let replica: ReplicaControl;
    /** Held from beforeAll to afterAll: no other file pauses or stops the replica meanwhile. */
    let release: (() => Promise<void>) | undefined;
    /** Probes every 100 ms, lag bound 60 s: a paused replay stays in use (the proof that it serves the pages). */
    let reads: ReadRouter;
    /** Probed only when a test says so, lag bound 1 s: the states the metrics show. */
    let manual: ReadRouter;
    /** The view-export app (with `reads`) and the metrics app (with `manual`). */
    let t: TestApp;
    let t2: TestApp;
    let dir: string;
    /** Awaited after each step of a job of `t` (the view-export test sets it). */
    let afterChunk: (job: JobRow) => Promise<void> = async () => undefined;

    const pause = (): Promise<void> => replica.pause();
    const resume = (): Promise<void> => replica.resume();
    const caughtUp = (router: ReadRouter): Promise<void> => replica.caughtUp(router);
    const scrape = async (): Promise<string> => {
      const res = await t2.request({
        method: 'GET',
        url: '/metrics',
        token: null,
        headers: { authorization: `Bearer ${METRICS_TOKEN}` },
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.body).not.toContain(password);
      return res.body;
    };
    const health = async (): Promise<{ status: number; body: string; replicas: unknown }> => {
      const res = await t2.request({ method: 'GET', url: '/healthcheck', token: null });
      for (const secret of [password, replicaHost, label, 'postgres://', secretUrl.port || '5432'])
        expect(res.body, secret).not.toContain(secret);
      return { status: res.statusCode, body: res.body, replicas: res.json().replicas };
    };
    const patient = (family: string): Record<string, unknown> => ({
      resourceType: 'Patient',
      name: [{ family }],
    });

    beforeAll(async () => {
      release = await holdReplica(primaryUrl as string);
      db = await openTestPostgres(primaryUrl as string, schema);
      replica = await replicaControl(db, replicaUrl as string);
      // A test run killed while replay was paused would leave it paused.
      await resume();
      await replica.schemaArrived(schema);
      const pools = { max: 4, connectTimeoutMs: 2000, statementTimeoutMs: 25_000, schema };
      reads = createReadRouter({
        primary: db,
        replicas: await openReplicas([secretUrl.toString()], pools),
        maxLagMs: 60_000,
        checkMs: 100,
        log,
      });
      manual = createReadRouter({
        primary: db,
        replicas: await openReplicas([secretUrl.toString()], pools),
        maxLagMs: 1000,
        checkMs: 3_600_000,
        log,
      });
      reads.start();
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-replica-status-'));
      const database: TestDatabase = { name: 'postgres', open: async () => db };
      t = await startTestApp(
        database,
        { dataDir: dir },
        { db, reads, jobs: { exportPageSize: 3, afterChunk: (job) => afterChunk(job) } },
      );
      t2 = await startTestApp(database, { dataDir: dir, metricsToken: METRICS_TOKEN }, { db, reads: manual });
      await caughtUp(reads);
      await caughtUp(manual);
    }, 900_000); // waits for the other replica file (holdReplica)

    afterAll(async () => {
      // Leave the replica as found: replaying, and running.
      await replica?.restore();
      await t2?.close();
      await t?.close();
      await reads?.close();
      await manual?.close();
      await replica?.close();
      await db?.close();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
      await release?.();
    }, 60_000);

    const familiesView = {
      resourceType: 'ViewDefinition',
      name: 'families',
      resource: 'Patient',
      select: [{ column: [{ name: 'family', path: 'name.first().family', type: 'string' }] }],
    };
    /** Kicks off a view export of the Patients' family names, waits for it, and returns the names, sorted. */
    const exportFamilies = async (token: string): Promise<string[]> => {
      const res = await kickOff(t, token, '$viewdefinition-export', {
        parameter: [{ name: 'view', part: [{ name: 'viewResource', resource: familiesView }] }],
      });
      const job = await waitForJob(t, jobIdOf(res), token, 60_000);
      expect(job.status).toBe('completed');
      const url = (job.output?.parameter[0]?.part.find((x) => x.name === 'url')?.valueUri ?? '').replace(
        'http://cinder.test',
        '',
      );
      const file = await t.request({ method: 'GET', url, token });
      expect(file.statusCode, file.body).toBe(200);
      return file.body
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { family: string }).family)
        .sort();
    };
    const eight = ['V0', 'V1', 'V2', 'V3', 'V4', 'V5', 'V6', 'V7'];

    it('holds what was written before the kick-off, even while the replica has not replayed it', async () => {
      const q = await t.newProject();
      for (let i = 0; i < 7; i++) await created(t, q.adminToken, patient(`V${i}`));
      await caughtUp(reads);
      await pause();
      try {
        // Written just before the kick-off, by the login that kicks it off, while the replica cannot replay it.
        await created(t, q.adminToken, patient('V7'));
        expect(await exportFamilies(q.adminToken)).toEqual(eight);
        // The replica stayed in use all along (its bound is 60 s): the pages went to the primary because the replica
        // had not replayed the job's start position.
        expect(reads.status()[0]?.state).toBe('ok');
        const other = await t.request({
          method: 'GET',
          url: `${t.fhir}/Patient?family=V7`,
          token: q.memberToken,
        });
        expect(other.json().entry ?? []).toEqual([]);
      } finally {
        await resume();
      }
      await caughtUp(reads);
    });

    it('reads the pages of a view export on the replica once it has replayed the start position', async () => {
      const q = await t.newProject();
      for (let i = 0; i < 7; i++) await created(t, q.adminToken, patient(`V${i}`));
      await caughtUp(reads);
      await created(t, q.adminToken, patient('V7'));
      let late: string | undefined;
      // After the job's first step (pages of 3): once the replica has replayed what the job must see, its replay is
      // paused and a Patient written. A page read on the primary would hold it (its rid is the highest); the
      // replica's pages cannot.
      afterChunk = async (job) => {
        if (job.kind !== 'view-export' || late !== undefined) return;
        await caughtUp(reads);
        await pause();
        late = (await created(t, q.adminToken, patient('Late'))).id as string;
      };
      try {
        expect(await exportFamilies(q.adminToken)).toEqual(eight);
        expect(late).toBeDefined();
        // The primary has it: the pages after the first came from the paused replica.
        const res = await t.request({
          method: 'GET',
          url: `${t.fhir}/Patient/${late as string}`,
          token: q.adminToken,
        });
        expect(res.statusCode).toBe(200);
      } finally {
        afterChunk = async () => undefined;
        await resume();
      }
      await caughtUp(reads);
    });

    it('shows the replica in /metrics as probed, follows its lag, and counts it in /healthcheck', async () => {
      const p = await t2.newProject();
      await caughtUp(manual);
      let text = await scrape();
      expect(sample(text, 'cinder_db_replica_up', label)).toBe(1);
      expect(sample(text, 'cinder_db_replica_in_use', label)).toBe(1);
      // In use: within the bound of 1 s (the primary's other databases keep writing, so it may be a little behind).
      expect(sample(text, 'cinder_db_replica_lag_seconds', label)).toBeLessThanOrEqual(1);
      expect(sample(text, 'cinder_db_replica_behind_bytes', label)).toBeGreaterThanOrEqual(0);
      expect(await health()).toMatchObject({ status: 200, replicas: { configured: 1, inUse: 1 } });
      await pause();
      try {
        await created(t2, p.adminToken, patient('Lagged'));
        await until('the replica to lag beyond the bound', async () => {
          await manual.check();
          return manual.status()[0]?.state === 'lagging';
        });
        text = await scrape();
        expect(sample(text, 'cinder_db_replica_up', label)).toBe(1);
        expect(sample(text, 'cinder_db_replica_in_use', label)).toBe(0);
        expect(sample(text, 'cinder_db_replica_lag_seconds', label)).toBeGreaterThan(1);
        expect(sample(text, 'cinder_db_replica_behind_bytes', label)).toBeGreaterThan(0);
        // Skipped, and the healthcheck still passes: the primary serves.
        expect(await health()).toMatchObject({ status: 200, replicas: { configured: 1, inUse: 0 } });
      } finally {
        await resume();
      }
      await caughtUp(manual);
      text = await scrape();
      expect(sample(text, 'cinder_db_replica_in_use', label)).toBe(1);
      expect(sample(text, 'cinder_db_replica_lag_seconds', label)).toBeLessThanOrEqual(1);
      // Tenants never see it: a project admin's and the super administrator's tokens get 401 without a word of it.
      for (const token of [p.adminToken, p.memberToken, t2.adminToken]) {
        const res = await t2.request({ method: 'GET', url: '/metrics', token });
        expect(res.statusCode).toBe(401);
        expect(res.json().resourceType).toBe('OperationOutcome');
        expect(res.body).not.toContain('replica');
      }
    });

    it('shows the replica down while it is stopped, keeps the healthcheck passing, and logs no password', async (ctx) => {
      const cluster = await replicaCluster(replicaUrl as string);
      if (!cluster)
        ctx.skip(
          'the replica is not a Debian cluster of this machine that this user may stop (pg_lsclusters, pg_ctlcluster)',
        );
      await caughtUp(manual);
      await run('pg_ctlcluster', [...(cluster as [string, string]), 'stop', '-m', 'fast']);
      try {
        await until('the probe to mark the replica down', async () => {
          await manual.check();
          return manual.status()[0]?.state === 'down';
        });
        const text = await scrape();
        expect(sample(text, 'cinder_db_replica_up', label)).toBe(0);
        expect(sample(text, 'cinder_db_replica_in_use', label)).toBe(0);
        // Nothing is known of the lag of a replica that does not answer.
        expect(sample(text, 'cinder_db_replica_lag_seconds', label)).toBeUndefined();
        expect(sample(text, 'cinder_db_replica_behind_bytes', label)).toBeUndefined();
        const h = await health();
        expect(h).toMatchObject({ status: 200, replicas: { configured: 1, inUse: 0 } });
        expect(JSON.parse(h.body)).toMatchObject({ ok: true, database: { status: 'ok' } });
        // The skip was logged with its reason, without the password.
        const skipped = logLines.filter(
          (l) => l.includes('read replica skipped') && l.includes('"to":"down"'),
        );
        expect(skipped.length).toBeGreaterThan(0);
        expect(skipped[0]).toContain(label);
      } finally {
        await run('pg_ctlcluster', [...(cluster as [string, string]), 'start']);
      }
      await caughtUp(manual);
      await caughtUp(reads);
      const text = await scrape();
      expect(sample(text, 'cinder_db_replica_up', label)).toBe(1);
      expect(sample(text, 'cinder_db_replica_in_use', label)).toBe(1);
      expect(await health()).toMatchObject({ status: 200, replicas: { configured: 1, inUse: 1 } });
      expect(logLines.some((l) => l.includes('read replica in use'))).toBe(true);
      for (const line of logLines) expect(line).not.toContain(password);
      expect(JSON.stringify(manual.status())).not.toContain(password);
    });
  },
);
