// Migration 028 on a database written by earlier versions: `:missing=true` and `:not` answer as before while the
// index backfill has not written sp_missing for the resources stored before it (the anti-join), and from sp_missing's
// candidates once it has; the dictionary sp_param_ids holds the ids the code reads; a fresh database records no
// backfill.
import { afterEach, describe, expect, it } from 'vitest';
import type { Db } from '../db.js';
import { migrate, MIGRATIONS } from '../migrate.js';
import { executeSearch } from '../../fhir/search/execute.js';
import { INDEX_TABLES, rewriteIndexTables } from '../../fhir/search/index-writer.js';
import { planMissing } from '../../fhir/search/missing-plan.js';
import { parseSearchRequest } from '../../fhir/search/parse.js';
import type { Resource } from '../../fhir/types.js';
import { createIndexBackfill } from '../../jobs/index-backfill.js';
import { paramIds } from './028-param-codes.js';
import { bareDatabases } from '../../../test/support/db.js';

const PROJECT = 'p028';
const scope = { projectId: PROJECT };

/** Stores resources with their index rows as the writer before migration 028 did: no sp_missing rows. */
async function storeOldWay(db: Db, resources: Resource[]): Promise<void> {
  for (const resource of resources) {
    const r = await db.query<{ rid: string }>(
      `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, content)
       VALUES ($1, $2, $3, 1, now(), $4::json) RETURNING rid`,
      [resource.resourceType, resource.id, PROJECT, JSON.stringify(resource)],
    );
    const old = INDEX_TABLES.filter((t) => t !== 'sp_missing');
    await rewriteIndexTables(db, [{ rid: Number(r.rows[0]?.rid), resource }], old);
  }
}

const obs = (id: string, status: string | undefined, subject?: string): Resource => ({
  resourceType: 'Observation',
  id,
  ...(status ? { status } : {}),
  code: { coding: [{ system: 'http://loinc.org', code: '8302-2' }] },
  ...(subject ? { subject: { reference: subject } } : {}),
});

const CASES: [Record<string, string>, string[]][] = [
  [{ 'subject:missing': 'true' }, ['o2', 'o4']],
  [{ 'subject:missing': 'false' }, ['o1', 'o3']],
  [{ 'status:not': 'final' }, ['o3', 'o4']],
  [{ 'status:not': 'final,amended' }, ['o4']],
  [{ 'status:missing': 'true' }, ['o4']],
];

async function answers(db: Db): Promise<[Record<string, string>, string[]][]> {
  const out: [Record<string, string>, string[]][] = [];
  for (const [query] of CASES) {
    const r = await executeSearch(db, parseSearchRequest('Observation', query), scope);
    out.push([query, r.matches.map((m) => m.id).sort()]);
  }
  return out;
}

/** Whether the search would start from sp_missing's candidates. */
async function fromCandidates(db: Db, query: Record<string, string>): Promise<boolean> {
  const req = await planMissing(db, parseSearchRequest('Observation', query));
  return req.filters.every((f) => f.fromCandidates === true);
}

describe.each(bareDatabases(2))('migration 028 on $name', (database) => {
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => cleanup?.());
  const open = async (): Promise<Db> => {
    const { db, drop } = await database.open();
    cleanup = async () => {
      await db.close();
      await drop();
    };
    return db;
  };

  it('answers as before until the backfill is done, and from sp_missing after it', async () => {
    const db = await open();
    await migrate(
      db,
      MIGRATIONS.filter((m) => m.version < 28),
    );
    await storeOldWay(db, [
      obs('o1', 'final', 'Patient/p1'),
      obs('o2', 'final'),
      obs('o3', 'amended', 'Patient/p2'),
      obs('o4', undefined),
      { resourceType: 'Patient', id: 'p1' },
    ]);
    expect(await migrate(db)).toEqual([28]);
    const maxRid = (await db.query<{ m: string }>('SELECT max(rid)::text AS m FROM resources')).rows[0]?.m;
    const backfill = await db.query<{ upto: string; state: string }>(
      `SELECT upto::text AS upto, state FROM index_backfills WHERE table_name = 'sp_missing'`,
    );
    expect(backfill.rows).toEqual([{ upto: maxRid, state: 'pending' }]);
    // The dictionary is the code's.
    const dict = await db.query<{ id: number; resource_type: string; code: string }>(
      'SELECT id, resource_type, code FROM sp_param_ids ORDER BY id',
    );
    expect(dict.rows.map((r) => [r.id, r.resource_type, r.code])).toEqual(paramIds());

    // Before the backfill: no sp_missing rows for these resources, and the anti-join's answers.
    expect((await db.query('SELECT 1 FROM sp_missing')).rows).toHaveLength(0);
    expect(await fromCandidates(db, { 'subject:missing': 'true' })).toBe(false);
    expect(await answers(db)).toEqual(CASES);

    const bf = createIndexBackfill({ db, batchSize: 2, pollMs: 10 });
    bf.start();
    await bf.finished;
    await bf.stop();
    const done = await db.query<{ state: string; done_count: string }>(
      `SELECT state, done_count::text AS done_count FROM index_backfills WHERE table_name = 'sp_missing'`,
    );
    expect(done.rows).toEqual([{ state: 'done', done_count: '5' }]);
    expect((await db.query('SELECT 1 FROM sp_missing')).rows).toHaveLength(5);
    for (const [query] of CASES)
      if (!('subject:missing' in query && query['subject:missing'] === 'false'))
        expect(await fromCandidates(db, query), JSON.stringify(query)).toBe(true);
    expect(await answers(db)).toEqual(CASES);
  });

  it('records no backfill on a fresh database', async () => {
    const db = await open();
    expect(await migrate(db)).toEqual(MIGRATIONS.map((m) => m.version));
    expect(
      (await db.query(`SELECT 1 FROM index_backfills WHERE table_name = 'sp_missing'`)).rows,
    ).toHaveLength(0);
  });
});
