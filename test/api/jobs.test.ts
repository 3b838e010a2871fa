// Two server instances on one PostgreSQL (API.md §5): 10 jobs each run exactly once across both runners, and a
// cancel sent to one instance stops a job running on the other (LISTEN/NOTIFY signal).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobRow } from '../../src/jobs/queue.js';
import { postgresSignals, type Signals } from '../../src/storage/signals.js';
import { testDatabases } from '../support/db.js';
import { startTestApp, type TestApp, createEntry, postBundle } from '../support/app.js';
import { startExport, waitForJob } from '../support/jobs.js';

const url = process.env.TEST_DATABASE_URL;
const postgres = testDatabases().find((d) => d.name === 'postgres');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe.runIf(url && postgres)('two instances on PostgreSQL', () => {
  let a: TestApp;
  let b: TestApp;
  let dir: string;
  const signals: Signals[] = [];
  const chunks: Record<string, Set<string>> = { a: new Set(), b: new Set() };
  let slow = false;
  let token: string;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-jobs-'));
    const channel = `jobs_${randomBytes(4).toString('hex')}`;
    const sig = (): Signals => {
      const s = postgresSignals(url as string, { schema: channel });
      signals.push(s);
      return s;
    };
    const hook = (name: 'a' | 'b') => async (job: JobRow) => {
      chunks[name]?.add(job.id);
      if (slow) await sleep(100);
    };
    const database = postgres as NonNullable<typeof postgres>;
    a = await startTestApp(
      database,
      // Ten exports of one client at once: above the default quota of active exports (export-limits.test.ts).
      { dataDir: dir, maxActiveExportsPerUser: 20 },
      { signals: sig(), jobs: { afterChunk: hook('a'), exportPageSize: 2 } },
    );
    b = await startTestApp(
      database,
      { dataDir: dir, maxActiveExportsPerUser: 20 },
      { db: a.db, signals: sig(), jobs: { afterChunk: hook('b'), exportPageSize: 2 } },
    );
    token = (await a.newProject()).adminToken;
    const res = await postBundle(
      a,
      token,
      'transaction',
      Array.from({ length: 30 }, (_, i) =>
        createEntry({ resourceType: 'Patient', name: [{ family: `T${i}` }] }),
      ),
    );
    expect(res.statusCode).toBe(200);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    for (const s of signals) await s.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('runs 10 jobs, each completed exactly once', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const t = i % 2 ? a : b;
      ids.push(await startExport(t, token, '_type=Patient'));
    }
    for (const id of ids) expect((await waitForJob(a, id, token)).status).toBe('completed');
    const rows = await a.db.query<{ id: string; attempts: number; versions: number; completed: number }>(
      // The versions: the past ones in resource_history, the current one in resources.
      `WITH v AS (
         SELECT id, content FROM resource_history WHERE resource_type = 'AsyncJob'
         UNION ALL SELECT id, content FROM resources WHERE resource_type = 'AsyncJob' AND NOT deleted)
       SELECT j.id, j.attempts,
         (SELECT count(*)::int FROM v WHERE v.id = j.id) AS versions,
         (SELECT count(*)::int FROM v WHERE v.id = j.id AND v.content->>'status' = 'completed') AS completed
       FROM jobs j WHERE j.id = ANY($1::text[])`,
      [ids],
    );
    expect(rows.rows).toHaveLength(10);
    for (const r of rows.rows) expect(r).toMatchObject({ attempts: 1, versions: 2, completed: 1 });
    // Each job ran on exactly one instance.
    for (const id of ids) expect(Number(chunks.a?.has(id)) + Number(chunks.b?.has(id))).toBe(1);
  });

  it('a cancel sent to one instance stops a job running on the other', async () => {
    slow = true;
    try {
      const id = await startExport(a, token, '_type=Patient');
      const until = Date.now() + 10_000;
      while (!chunks.a?.has(id) && !chunks.b?.has(id)) {
        if (Date.now() > until) throw new Error('export did not start');
        await sleep(20);
      }
      const runner = chunks.a?.has(id) ? 'a' : 'b';
      const other = runner === 'a' ? b : a;
      const res = await other.request({ method: 'POST', url: `${other.fhir}/AsyncJob/${id}/$cancel`, token });
      expect(res.statusCode).toBe(200);
      const at = Date.now();
      const files = path.join(dir, 'files', 'exports', id);
      for (;;) {
        const row = await a.db.query<{ cancel_requested: boolean }>(
          'SELECT cancel_requested FROM jobs WHERE id = $1',
          [id],
        );
        if (!row.rows[0]?.cancel_requested && !fs.existsSync(files)) break;
        expect(Date.now() - at).toBeLessThan(2000);
        await sleep(20);
      }
      const job = await a.request({ method: 'GET', url: `${a.fhir}/AsyncJob/${id}`, token });
      expect(job.json()).toMatchObject({ status: 'cancelled' });
      expect(job.json().output).toBeUndefined();
    } finally {
      slow = false;
    }
  });
});
