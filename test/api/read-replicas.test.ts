// Read replicas (config databaseReadUrls, src/storage/replicas.ts) against a REAL PostgreSQL streaming replica of
// this machine's cluster (scripts/test-replica.sh makes it; .ci/run exports TEST_REPLICA_URL). Through the HTTP API:
// reads are served by the replica (proved by pausing its replay: another login does not see a new write, the writer
// does), a login's writes are visible to its next reads, projects stay apart, a scoped token is limited as on the
// primary, export pages, and the replica stopped mid-run (no 5xx; used again once it is back) or lagging beyond the
// bound (skipped). Every test leaves the replica running and replaying.
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
import { openTestPostgres, type TestDatabase } from '../support/db.js';
import { created, scopedClientToken, startTestApp, type TestApp } from '../support/app.js';
import { downloadOutput, startExport, waitForJob } from '../support/jobs.js';
import type { Db } from '../../src/storage/db.js';
import { openPostgres } from '../../src/storage/postgres.js';
import { createReadRouter, openReplicas, type ReadRouter } from '../../src/storage/replicas.js';

const primaryUrl = process.env.TEST_DATABASE_URL;
const replicaUrl = process.env.TEST_REPLICA_URL;

describe.skipIf(!primaryUrl || !replicaUrl)(
  'read replicas (needs TEST_DATABASE_URL and TEST_REPLICA_URL: scripts/test-replica.sh makes the replica)',
  () => {
    const schema = `t_${randomBytes(6).toString('hex')}`;
    let db: Db;
    let replica: ReplicaControl;
    /** Held from beforeAll to afterAll: no other file pauses or stops the replica meanwhile. */
    let release: (() => Promise<void>) | undefined;
    /** Probes every 100 ms, lag bound 60 s (a paused replay stays in use: the proof that it serves reads). */
    let reads: ReadRouter;
    /** Probed only when a test says so, lag bound 1 s: the lag and the failure between two probes. */
    let manual: ReadRouter;
    let t: TestApp;
    let t2: TestApp;
    let dir: string;
    let p: { projectId: string; adminToken: string; memberToken: string };
    let other: { projectId: string; adminToken: string; memberToken: string };

    const pause = (): Promise<void> => replica.pause();
    const resume = (): Promise<void> => replica.resume();
    const caughtUp = (router: ReadRouter): Promise<void> => replica.caughtUp(router);
    const get = (app: TestApp, token: string, url: string) =>
      app.request({ method: 'GET', url: `${app.fhir}/${url}`, token });
    const patient = (family: string): Record<string, unknown> => ({
      resourceType: 'Patient',
      name: [{ family }],
    });
    const families = (bundle: { entry?: { resource: { name?: { family: string }[] } }[] }): string[] =>
      (bundle.entry ?? []).map((e) => e.resource.name?.[0]?.family ?? '').sort();

    beforeAll(async () => {
      release = await holdReplica(primaryUrl as string);
      db = await openTestPostgres(primaryUrl as string, schema);
      replica = await replicaControl(db, replicaUrl as string);
      // The schema and its tables reach the replica by replication.
      await replica.schemaArrived(schema);
      const pools = { max: 4, connectTimeoutMs: 2000, statementTimeoutMs: 25_000, schema };
      reads = createReadRouter({
        primary: db,
        replicas: await openReplicas([replicaUrl as string], pools),
        maxLagMs: 60_000,
        checkMs: 100,
      });
      manual = createReadRouter({
        primary: db,
        replicas: await openReplicas([replicaUrl as string], pools),
        maxLagMs: 1000,
        checkMs: 3_600_000,
      });
      reads.start();
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-replicas-'));
      const database: TestDatabase = { name: 'postgres', open: async () => db };
      t = await startTestApp(database, { dataDir: dir }, { db, reads, jobs: { exportPageSize: 3 } });
      t2 = await startTestApp(database, { dataDir: dir }, { db, reads: manual });
      p = await t.newProject();
      other = await t.newProject();
      await caughtUp(reads);
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

    it('serves other logins from the replica, and a login that wrote from what it wrote', async () => {
      const before = await created(t, p.adminToken, patient('Before'));
      await caughtUp(reads);
      await pause();
      try {
        // The writer (the project admin's login) writes while the replica cannot replay it.
        const fresh = await created(t, p.adminToken, patient('Fresh'));
        const updated = await t.request({
          method: 'PUT',
          url: `${t.fhir}/Patient/${before.id as string}`,
          token: p.adminToken,
          payload: { ...patient('Renamed'), id: before.id },
        });
        expect(updated.statusCode, updated.body).toBe(200);
        // Its next reads see its writes: read, search, vread, history.
        expect((await get(t, p.adminToken, `Patient/${fresh.id as string}`)).statusCode).toBe(200);
        expect(families((await get(t, p.adminToken, 'Patient')).json())).toEqual(['Fresh', 'Renamed']);
        const own = await get(t, p.adminToken, `Patient/${before.id as string}`);
        expect(own.json().name[0].family).toBe('Renamed');
        expect((await get(t, p.adminToken, `Patient/${before.id as string}/_history/2`)).statusCode).toBe(
          200,
        );
        expect((await get(t, p.adminToken, `Patient/${before.id as string}/_history`)).json().total).toBe(2);
        // Another login of the same project is served by the replica: the paused replay shows the state before.
        expect(reads.status()[0]?.state).toBe('ok');
        expect((await get(t, p.memberToken, `Patient/${fresh.id as string}`)).statusCode).toBe(404);
        expect(families((await get(t, p.memberToken, 'Patient')).json())).toEqual(['Before']);
        const search = await t.request({
          method: 'POST',
          url: `${t.fhir}/Patient/_search`,
          token: p.memberToken,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'family=Fresh',
        });
        expect(search.statusCode, search.body).toBe(200);
        expect(search.json().entry ?? []).toEqual([]);
        // POST _search is a read: it does not pin the member's login to the primary.
        expect((await get(t, p.memberToken, `Patient/${fresh.id as string}`)).statusCode).toBe(404);
        // A view is read there too.
        const csv = await get(t, p.memberToken, 'Patient/$csv?_fields=name.family');
        expect(csv.statusCode, csv.body).toBe(200);
        expect(csv.body).toContain('Before');
        expect(csv.body).not.toContain('Fresh');
      } finally {
        await resume();
      }
      // Once replayed, everyone sees it.
      await caughtUp(reads);
      expect(families((await get(t, p.memberToken, 'Patient')).json())).toEqual(['Fresh', 'Renamed']);
    });

    it("never shows another project's resources, on the replica as on the primary", async () => {
      const mine = await created(t, p.adminToken, patient('Mine'));
      const theirs = await created(t, other.adminToken, patient('Theirs'));
      await caughtUp(reads);
      // Logins that did not write (member tokens) read from the replica.
      for (const [who, seen, unseen] of [
        [p.memberToken, mine, theirs],
        [other.memberToken, theirs, mine],
      ] as const) {
        expect((await get(t, who, `Patient/${seen.id as string}`)).statusCode).toBe(200);
        expect((await get(t, who, `Patient/${unseen.id as string}`)).statusCode).toBe(404);
        expect((await get(t, who, `Patient/${unseen.id as string}/_history/1`)).statusCode).toBe(404);
        const ids = ((await get(t, who, 'Patient?_count=100')).json().entry ?? []).map(
          (e: { resource: { id: string } }) => e.resource.id,
        );
        expect(ids).toContain(seen.id);
        expect(ids).not.toContain(unseen.id);
        const hist = ((await get(t, who, '_history')).json().entry ?? []).map(
          (e: { fullUrl: string }) => e.fullUrl,
        );
        expect(hist.some((u: string) => u.endsWith(`Patient/${unseen.id as string}`))).toBe(false);
      }
    });

    it('limits a scoped token on the replica as on the primary', async () => {
      const scoped = await scopedClientToken(t, p.adminToken, p.projectId, 'system/Patient.rs');
      const obs = await created(t, p.adminToken, {
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'x' },
      });
      await caughtUp(reads);
      await pause();
      try {
        const fresh = await created(t, p.adminToken, patient('ScopedFresh'));
        // The scoped client did not write: the replica serves it (the paused replay hides the new Patient).
        expect((await get(t, scoped, `Patient/${fresh.id as string}`)).statusCode).toBe(404);
        expect((await get(t, scoped, 'Patient')).statusCode).toBe(200);
        // Outside its scopes: refused, whichever database would have answered.
        const denied = await get(t, scoped, `Observation/${obs.id as string}`);
        expect(denied.statusCode).toBe(403);
        expect(denied.json().resourceType).toBe('OperationOutcome');
        expect((await get(t, scoped, 'Observation')).statusCode).toBe(403);
        // A write it may not make is refused and does not break its reads.
        const write = await t.request({
          method: 'POST',
          url: `${t.fhir}/Patient`,
          token: scoped,
          payload: patient('Nope'),
        });
        expect(write.statusCode).toBe(403);
        expect((await get(t, scoped, 'Patient')).statusCode).toBe(200);
      } finally {
        await resume();
      }
      await caughtUp(reads);
    });

    it('exports what was written before the kick-off, reading pages from the replica', async () => {
      const q = await t.newProject();
      for (let i = 0; i < 7; i++) await created(t, q.adminToken, patient(`E${i}`));
      await caughtUp(reads);
      // Statistics of the standby's own reads are in the replica's `test` database.
      const statsDb = await openPostgres(replicaUrl as string, { max: 1 });
      const replicaScans = async (): Promise<number> => {
        const r = await statsDb.query<{ n: number }>(
          `SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)), 0)::int8 AS n FROM pg_stat_user_tables
           WHERE schemaname = $1 AND relname = 'resources'`,
          [schema],
        );
        return Number(r.rows[0]?.n ?? 0);
      };
      try {
        const before = await replicaScans();
        // The last one written just before the kick-off: the export must hold it.
        await created(t, q.adminToken, patient('E7'));
        const id = await startExport(t, q.adminToken, '_type=Patient');
        const job = await waitForJob(t, id, q.adminToken, 60_000);
        expect(job.status).toBe('completed');
        const out = await downloadOutput(t, job, q.adminToken);
        expect((out.Patient ?? []).map((r) => (r.name as { family: string }[])[0]?.family).sort()).toEqual([
          'E0',
          'E1',
          'E2',
          'E3',
          'E4',
          'E5',
          'E6',
          'E7',
        ]);
        // The pages were read on the replica (its statistics count the scans of its own queries).
        await until(
          'the replica to count the export scans',
          async () => (await replicaScans()) > before,
          10_000,
        );
      } finally {
        await statsDb.close();
      }
    });

    it('skips a replica that lags beyond the bound, and uses it again once it has caught up', async () => {
      const seed = await created(t2, p.adminToken, patient('LagSeed'));
      await caughtUp(manual);
      expect((await get(t2, p.memberToken, `Patient/${seed.id as string}`)).statusCode).toBe(200);
      await pause();
      let late: Record<string, unknown>;
      try {
        late = await created(t2, p.adminToken, patient('Late'));
        // The replica falls behind the primary by more than 1 s: skipped at the next probe.
        await until('the replica to lag beyond the bound', async () => {
          await manual.check();
          return manual.status()[0]?.state === 'lagging';
        });
        // The member's reads now come from the primary: they see the write the replica has not replayed.
        expect((await get(t2, p.memberToken, `Patient/${late.id as string}`)).statusCode).toBe(200);
      } finally {
        await resume();
      }
      await caughtUp(manual);
      // In use again: with replay paused, a new write is not seen by the member.
      await pause();
      try {
        const hidden = await created(t2, p.adminToken, patient('Hidden'));
        expect(manual.status()[0]?.state).toBe('ok');
        expect((await get(t2, p.memberToken, `Patient/${hidden.id as string}`)).statusCode).toBe(404);
        expect((await get(t2, p.memberToken, `Patient/${late.id as string}`)).statusCode).toBe(200);
      } finally {
        await resume();
      }
      await caughtUp(manual);
    });

    it('answers from the primary while the replica is stopped, and uses the replica again when it is back', async (ctx) => {
      const cluster = await replicaCluster(replicaUrl as string);
      if (!cluster)
        ctx.skip(
          'the replica is not a Debian cluster of this machine that this user may stop (pg_lsclusters, pg_ctlcluster)',
        );
      const kept = await created(t, p.adminToken, patient('Kept'));
      await caughtUp(reads);
      await caughtUp(manual);
      expect(manual.status()[0]?.state).toBe('ok');
      await run('pg_ctlcluster', [...(cluster as [string, string]), 'stop', '-m', 'fast']);
      try {
        // The router without probes still thinks the replica is fine: the read fails there, and is answered by the
        // primary within the same request.
        const r = await get(t2, p.memberToken, `Patient/${kept.id as string}`);
        expect(r.statusCode, r.body).toBe(200);
        expect(manual.status()[0]?.state).toBe('down');
        // Reads and searches of every kind keep answering, and see new writes.
        const during = await created(t, p.adminToken, patient('During'));
        for (const app of [t, t2]) {
          for (const url of [
            `Patient/${kept.id as string}`,
            `Patient/${during.id as string}`,
            'Patient?family=During',
            `Patient/${kept.id as string}/_history`,
            '_history?_count=5',
            'Patient/$csv?_fields=name.family',
          ]) {
            const res = await get(app, p.memberToken, url);
            expect(res.statusCode, `${url}: ${res.body}`).toBe(200);
          }
        }
        await until('the probes to mark the replica down', async () => reads.status()[0]?.state === 'down');
      } finally {
        await run('pg_ctlcluster', [...(cluster as [string, string]), 'start']);
      }
      // Back: the periodic probes bring it back into use.
      await caughtUp(reads);
      await pause();
      try {
        const hidden = await created(t, p.adminToken, patient('AfterRestart'));
        expect((await get(t, p.memberToken, `Patient/${hidden.id as string}`)).statusCode).toBe(404);
      } finally {
        await resume();
      }
      await caughtUp(reads);
    });
  },
);
