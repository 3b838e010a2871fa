// Index backfill after an upgrade (migration 023, src/jobs/index-backfill.ts): resources stored before sp_text,
// sp_lastn and sp_identifier existed are found by `_text`, `$lastn` and `:of-type` once the background backfill has
// run; two processes on one database do it once, and a process that dies mid-way is resumed from its checkpoint.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/storage/db.js';
import { migrate } from '../../src/storage/migrate.js';
import { openPostgres } from '../../src/storage/postgres.js';
import { lockIndexRewrites, reindexResources } from '../../src/fhir/search/index-writer.js';
import { createIndexBackfill, type IndexBackfillOptions } from '../../src/jobs/index-backfill.js';
import { createNamed, scopedClientToken, startTestApp, type TestApp } from '../support/app.js';
import { openTestPostgres, testDatabases } from '../support/db.js';

type Json = Record<string, unknown>;
const V2 = 'http://terminology.hl7.org/CodeSystem/v2-0203';
const LOINC = 'http://loinc.org';
const TABLES = ['sp_identifier', 'sp_lastn', 'sp_text'];
const CODES = `${LOINC}|8867-4,${LOINC}|2339-0`;

const patient = (word: string, mrn: string): Json => ({
  resourceType: 'Patient',
  text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">${word} keeper</div>` },
  identifier: [{ type: { coding: [{ system: V2, code: 'MR' }] }, system: 'urn:mrn', value: mrn }],
  name: [{ family: word }],
});
const obs = (subject: string, code: string, date: string): Json => ({
  resourceType: 'Observation',
  status: 'final',
  code: { coding: [{ system: LOINC, code }] },
  subject: { reference: `Patient/${subject}` },
  effectiveDateTime: date,
});

/** A logger that keeps its lines. */
function memoryLog(): { lines: string[]; log: NonNullable<IndexBackfillOptions['log']> } {
  const lines: string[] = [];
  return {
    lines,
    log: {
      info: (_o, msg) => lines.push(msg),
      warn: (_o, msg) => lines.push(`WARN ${msg}`),
      debug: (_o, msg) => lines.push(`DEBUG ${msg}`),
    },
  };
}

/** Every row of the three tables, as text, in order. */
async function snapshot(db: Db): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const tbl of TABLES) {
    const r = await db.query<{ row: string }>(`SELECT x::text AS row FROM ${tbl} x ORDER BY 1`);
    out[tbl] = r.rows.map((x) => x.row);
  }
  return out;
}

/** What a full `$reindex` of every resource writes into the three tables: what the backfill must have written. */
async function canonical(db: Db): Promise<Record<string, string[]>> {
  const rids = (await db.query<{ rid: string }>('SELECT rid FROM resources')).rows.map((x) => Number(x.rid));
  await db.transaction((tx) => reindexResources(tx, rids));
  return snapshot(db);
}

/** The state of a database written before migrations 017/019/020, then upgraded: their tables empty, 023 run. */
async function simulateUpgrade(db: Db): Promise<void> {
  for (const tbl of TABLES) await db.query(`DELETE FROM ${tbl}`);
  await db.query('DROP TABLE index_backfills');
  await db.query('DELETE FROM schema_migrations WHERE version = 23');
  expect(await migrate(db)).toEqual([23]);
}

describe.each(testDatabases())('index backfill after an upgrade on $name', (database) => {
  let t: TestApp;
  let db: Db;
  /** A second pool on the same database: the second server process. */
  let db2: Db;
  let closeDbs: () => Promise<void>;
  let admin: string;
  let otherAdmin: string;
  let projectId: string;
  const id: Record<string, string> = {};

  const get = async (token: string, url: string): Promise<Json> => {
    const res = await t.request({ method: 'GET', url: `${t.fhir}/${url}`, token });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as Json;
  };
  const ids = (b: Json): string[] =>
    ((b.entry as { resource: Json }[] | undefined) ?? []).map((e) => e.resource.id as string).sort();

  beforeAll(async () => {
    const url = process.env.TEST_DATABASE_URL;
    if (database.name === 'postgres' && url) {
      const schema = `t_${randomBytes(6).toString('hex')}`;
      db = await openTestPostgres(url, schema);
      db2 = await openPostgres(url, { schema, max: 4 });
      closeDbs = async () => {
        await db2.close();
        await db.close();
      };
    } else {
      db = await database.open();
      db2 = db;
      closeDbs = () => db.close();
    }
    t = await startTestApp(database, {}, { db });
    const a = await t.newProject('Backfill A');
    admin = a.adminToken;
    projectId = a.projectId;
    otherAdmin = (await t.newProject('Backfill B')).adminToken;
    Object.assign(
      id,
      await createNamed(t, admin, {
        zebra: patient('Zebrafish', 'mrn-1'),
        okapi: patient('Okapi', 'mrn-2'),
        gone: patient('Zebrafish', 'mrn-3'),
        // Large stored content: the backfill indexes it like a write did.
        big: {
          ...patient('Quokka', 'mrn-4'),
          text: {
            status: 'generated',
            div: `<div xmlns="http://www.w3.org/1999/xhtml">${Array.from({ length: 5000 }, (_, i) => `w${i}`).join(' ')}</div>`,
          },
        },
      }),
    );
    Object.assign(
      id,
      await createNamed(t, admin, {
        hr1: obs(id.zebra!, '8867-4', '2024-01-01'),
        hr2: obs(id.zebra!, '8867-4', '2024-03-01'),
        glu: obs(id.zebra!, '2339-0', '2024-02-01'),
      }),
    );
    Object.assign(id, await createNamed(t, otherAdmin, { foreign: patient('Zebrafish', 'mrn-1') }));
    const del = await t.request({ method: 'DELETE', url: `${t.fhir}/Patient/${id.gone!}`, token: admin });
    expect(del.statusCode).toBeLessThan(300);
  });
  afterAll(async () => {
    await t?.close();
    await closeDbs?.();
  });

  it('fills the new tables of older resources once, with two processes at once; search finds them', async () => {
    await simulateUpgrade(db);
    const rows = (
      await db.query<{ table_name: string; upto: string; state: string }>(
        'SELECT table_name, upto, state FROM index_backfills ORDER BY 1',
      )
    ).rows;
    const maxRid = (await db.query<{ m: string }>('SELECT max(rid) AS m FROM resources')).rows[0]!.m;
    expect(rows.map((r) => [r.table_name, String(r.upto), r.state])).toEqual(
      TABLES.map((tbl) => [tbl, String(maxRid), 'pending']),
    );
    // Before the backfill: the older resources are missing from full text, $lastn and :of-type.
    expect(ids(await get(admin, 'Patient?_text=zebrafish'))).toEqual([]);
    expect(ids(await get(admin, `Observation/$lastn?patient=${id.zebra!}&code=${CODES}`))).toEqual([]);
    // A resource written after the upgrade is indexed at once (and left alone by the backfill).
    const late = (await createNamed(t, admin, { late: patient('Zebrafish', 'mrn-9') })).late!;
    expect(ids(await get(admin, 'Patient?_text=zebrafish'))).toEqual([late]);

    const one = memoryLog();
    const two = memoryLog();
    const common = { batchSize: 3, pollMs: 50, logEvery: 6 };
    // After A's first batch: a client updates an older resource not backfilled yet, and another writer holds the
    // next resource of A's table for a while (A's next batch waits for it, without blocking the writer).
    let held: Promise<void> | undefined;
    const a = createIndexBackfill({
      db,
      log: one.log,
      ...common,
      afterBatch: async (_table, checkpoint) => {
        if (held) return;
        const put = await t.request({
          method: 'PUT',
          url: `${t.fhir}/Patient/${id.okapi!}`,
          token: admin,
          payload: { ...patient('Ibex', 'mrn-2'), id: id.okapi! },
        });
        expect(put.statusCode, put.body).toBe(200);
        let locked!: () => void;
        const isLocked = new Promise<void>((r) => (locked = r));
        held = db2.transaction(async (tx) => {
          await tx.query(
            'SELECT rid FROM resources WHERE rid = (SELECT min(rid) FROM resources WHERE rid > $1 AND NOT deleted) FOR UPDATE',
            [checkpoint],
          );
          locked();
          await new Promise((r) => setTimeout(r, 300));
        });
        await isLocked;
      },
    });
    const b = createIndexBackfill({ db: db2, log: two.log, ...common });
    a.start();
    b.start();
    await Promise.all([a.finished, b.finished]);
    await Promise.all([a.stop(), b.stop()]);
    await held;

    // Each table was started and finished once across both processes, with the counts in the log.
    const lines = [...one.lines, ...two.lines];
    expect(lines.filter((l) => l.startsWith('WARN'))).toEqual([]);
    // On PostgreSQL the held resource made A's next batch try again (PGlite has one connection: A simply waited).
    if (db !== db2)
      expect(one.lines.some((l) => l.startsWith('DEBUG') && l.includes('trying again'))).toBe(true);
    const done = (
      await db.query<{ table_name: string; state: string; done_count: string; upto: string }>(
        'SELECT table_name, state, done_count, upto FROM index_backfills ORDER BY 1',
      )
    ).rows;
    const expected = async (type: string | null): Promise<number> =>
      Number(
        (
          await db.query<{ n: string }>(
            `SELECT count(*) AS n FROM resources WHERE NOT deleted AND rid <= $1 ${type ? 'AND resource_type = $2' : ''}`,
            [maxRid, ...(type ? [type] : [])],
          )
        ).rows[0]!.n,
      );
    for (const r of done) {
      expect(r.state).toBe('done');
      const n = await expected(r.table_name === 'sp_lastn' ? 'Observation' : null);
      expect(Number(r.done_count)).toBe(n);
      expect(lines.filter((l) => l.startsWith(`index backfill of ${r.table_name}: starting`))).toHaveLength(
        1,
      );
      expect(
        lines.filter((l) => l.startsWith(`index backfill of ${r.table_name}: done, ${n} resources`)),
      ).toHaveLength(1);
    }
    // Progress lines every `logEvery` resources.
    expect(lines.some((l) => /^index backfill of sp_text: \d+ resources \(up to rid \d+/.test(l))).toBe(true);

    // Exactly the rows a full reindex writes: none missing, none twice, the deleted resource none.
    const after = await snapshot(db);
    expect(after.sp_text!.length).toBeGreaterThan(10);
    expect(after).toEqual(await canonical(db));

    // Found through the API, each project only its own.
    expect(ids(await get(admin, 'Patient?_text=zebrafish'))).toEqual([id.zebra!, late].sort());
    // The resource updated during the backfill is found by its new words only.
    expect(ids(await get(admin, 'Patient?_text=ibex'))).toEqual([id.okapi!]);
    expect(ids(await get(admin, 'Patient?_text=okapi'))).toEqual([]);
    expect(ids(await get(otherAdmin, 'Patient?_text=zebrafish'))).toEqual([id.foreign!]);
    expect(ids(await get(admin, 'Patient?_text=w4999'))).toEqual([id.big!]);
    expect(ids(await get(admin, `Patient?identifier:of-type=${V2}|MR|mrn-1`))).toEqual([id.zebra!]);
    expect(ids(await get(admin, `Observation/$lastn?patient=${id.zebra!}&code=${CODES}`))).toEqual(
      [id.hr2!, id.glu!].sort(),
    );
    expect(ids(await get(otherAdmin, `Observation/$lastn?patient=${id.zebra!}&code=${CODES}`))).toEqual([]);
    // A token scoped to Observation cannot search Patient words.
    const narrow = await scopedClientToken(t, admin, projectId, 'system/Observation.rs');
    const denied = await t.request({
      method: 'GET',
      url: `${t.fhir}/Patient?_text=zebrafish`,
      token: narrow,
    });
    expect(denied.statusCode).toBe(403);
    expect(denied.json().resourceType).toBe('OperationOutcome');
  });

  it('resumes from the checkpoint of a process that died mid-way; the dead one writes nothing more', async () => {
    await simulateUpgrade(db);
    let release!: () => void;
    const hang = new Promise<void>((r) => (release = r));
    let crashedAt: number | undefined;
    let crashed!: () => void;
    const crash = new Promise<void>((r) => (crashed = r));
    const one = memoryLog();
    const two = memoryLog();
    // Process A stops answering after its first batch (its lease is not renewed), like a process that died.
    const a = createIndexBackfill({
      db,
      log: one.log,
      batchSize: 2,
      leaseMs: 300,
      pollMs: 50,
      afterBatch: async (_table, checkpoint) => {
        if (crashedAt === undefined) {
          crashedAt = checkpoint;
          crashed();
          await hang;
        }
      },
    });
    a.start();
    await crash;
    const b = createIndexBackfill({ db: db2, log: two.log, batchSize: 2, leaseMs: 10_000, pollMs: 50 });
    b.start();
    await b.finished;
    // B took over A's table where A's last committed batch ended.
    expect(two.lines).toContain(
      two.lines.find((l) => l.startsWith('index backfill of sp_identifier: resuming after rid ')),
    );
    expect(two.lines.some((l) => l.includes(`resuming after rid ${crashedAt!} `))).toBe(true);
    release();
    await a.finished;
    await a.stop();
    await b.stop();
    expect(one.lines).toContain('WARN index backfill: another process took over this backfill');
    const states = (await db.query<{ state: string }>('SELECT state FROM index_backfills')).rows;
    expect(states.map((s) => s.state)).toEqual(['done', 'done', 'done']);
    expect(await snapshot(db)).toEqual(await canonical(db));
    expect(ids(await get(admin, 'Patient?_text=ibex'))).toEqual([id.okapi!]);
  });

  // PGlite has one connection: a transaction held open there blocks every other query, the check below included.
  it.runIf(database.name === 'postgres')(
    'waits for a $reindex batch in progress (one rewrite of a row at a time)',
    async () => {
      await simulateUpgrade(db);
      let release!: () => void;
      const hold = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      const reindexBatch = db2.transaction(async (tx) => {
        await lockIndexRewrites(tx);
        locked();
        await hold;
      });
      await isLocked;
      const a = createIndexBackfill({ db, batchSize: 2, pollMs: 50 });
      a.start();
      await new Promise((r) => setTimeout(r, 300));
      const progress = async (): Promise<number> =>
        Number(
          (await db.query<{ n: string }>('SELECT sum(done_count) AS n FROM index_backfills')).rows[0]!.n,
        );
      expect(await progress()).toBe(0);
      release();
      await reindexBatch;
      await a.finished;
      await a.stop();
      expect(await progress()).toBeGreaterThan(0);
      expect(await snapshot(db)).toEqual(await canonical(db));
    },
  );

  it('refuses a backfill row that names a table other than an index table', async () => {
    const before = Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM resources')).rows[0]!.n);
    await db.query(
      "INSERT INTO index_backfills (table_name, upto) VALUES ('resources', 9223372036854775807), ('sp_text; DROP TABLE resources', 1)",
    );
    const one = memoryLog();
    const a = createIndexBackfill({ db, log: one.log, pollMs: 50 });
    a.start();
    await a.finished;
    await a.stop();
    const after = Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM resources')).rows[0]!.n);
    expect(after).toBe(before);
    const failed = (
      await db.query<{ table_name: string }>("SELECT table_name FROM index_backfills WHERE state = 'failed'")
    ).rows.map((r) => r.table_name);
    expect(failed.sort()).toEqual(['resources', 'sp_text; DROP TABLE resources']);
    expect(one.lines.filter((l) => l.includes('not an index table'))).toHaveLength(2);
  });
});
