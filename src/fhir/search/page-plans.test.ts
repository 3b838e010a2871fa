// Searches that never read every match for one page (issue 30): a page of `_sort` by one search parameter is read
// from that parameter's index, with the plain, `code=` and `subject=` filters; its answers, pages and `previous` pages are
// those of the old plan (every match's sort key computed, then sorted), which `searchSql` still writes. The plans are
// checked by how many rows EXPLAIN ANALYZE says each table gave (rows returned plus rows its filter removed, times
// loops): far fewer than the matches. On PGlite and PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../../test/support/db.js';
import { recordQueries, rowsRead } from '../../../test/support/plans.js';
import type { Db, Queryable } from '../../storage/db.js';
import type { AccessScope, Resource } from '../types.js';
import { executeSearch } from './execute.js';
import { writeIndex } from './index-writer.js';
import { parseSearchRequest } from './parse.js';
import { searchSql } from './sql.js';

const N = 3000;
const LOINC = 'http://loinc.org';
const scope: AccessScope = { projectId: 'a' };

function observation(i: number, project: string): Resource {
  const day = String((i % 28) + 1).padStart(2, '0');
  return {
    resourceType: 'Observation',
    id: `${project}-o${i}`,
    status: 'final',
    code: { coding: [{ system: LOINC, code: i % 2 === 0 ? '8302-2' : `${i % 50}-9` }] },
    subject: { reference: `Patient/${project}-p${i % 100}` },
    // Every 10th without a date, every 9th a period (low and high differ by days); many ties on one day.
    ...(i % 10 === 5
      ? {}
      : i % 9 === 0
        ? { effectivePeriod: { start: `2020-02-${day}`, end: `2020-03-${day}` } }
        : { effectiveDateTime: `2020-0${(i % 3) + 1}-${day}T10:00:00Z` }),
    ...(i % 7 === 3 ? {} : { valueQuantity: { value: (i * 13) % 97, unit: 'cm' } }),
  };
}

function patient(i: number, project: string): Resource {
  return {
    resourceType: 'Patient',
    id: `${project}-p${i}`,
    ...(i % 11 === 4 ? {} : { name: [{ family: `Fam${(i * 7) % 40}`, given: [`G${i % 13}`] }] }),
  };
}

let tick = Date.parse('2024-01-01T00:00:00Z');

async function insert(db: Db, resources: Resource[], project: string, deleted = false): Promise<void> {
  for (let k = 0; k < resources.length; k += 1000) {
    const batch = resources.slice(k, k + 1000);
    await db.transaction(async (tx: Queryable) => {
      const res = await tx.query<{ rid: number; id: string }>(
        `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
         SELECT x.resource_type, x.id, $2, 1, x.last_updated, $3, x.content
         FROM jsonb_to_recordset($1::jsonb) AS x(n int, resource_type text, id text, last_updated timestamptz, content jsonb)
         ORDER BY x.n RETURNING rid, id`,
        [
          JSON.stringify(
            batch.map((r, n) => ({
              n,
              resource_type: r.resourceType,
              id: r.id,
              last_updated: new Date((tick += 1)).toISOString(),
              content: r,
            })),
          ),
          project,
          deleted,
        ],
      );
      // A deleted row keeps its index rows here: the search must still never return it.
      await writeIndex(
        tx,
        batch.map((resource) => ({ rid: Number(res.rows.find((x) => x.id === resource.id)?.rid), resource })),
      );
    });
  }
}

/** Every match in the old plan's order: the sort key of each match computed, then all sorted (searchSql). */
async function oldOrder(db: Db, type: string, query: Record<string, string>): Promise<string[]> {
  const q = searchSql(parseSearchRequest(type, { ...query, _count: '1' }), scope, 100_000);
  return (await db.query<{ id: string }>(q.text, q.values)).rows.map((r) => r.id);
}

/** Every match by following `next` cursors from the first page, then back from the last by `previous`. */
async function pages(db: Db, type: string, query: Record<string, string>, count: number) {
  const forward: string[][] = [];
  let cursor: Record<string, string> = {};
  for (;;) {
    const r = await executeSearch(
      db,
      parseSearchRequest(type, { ...query, ...cursor, _count: String(count) }),
      scope,
    );
    forward.push(r.matches.map((m) => m.id));
    if (!r.nextCursor) break;
    cursor = r.nextCursor;
  }
  // Back from the last page's first row.
  const backward: string[][] = [];
  let last = await executeSearch(
    db,
    parseSearchRequest(type, { ...query, ...cursor, _count: String(count) }),
    scope,
  );
  while (last.previousCursor) {
    last = await executeSearch(
      db,
      parseSearchRequest(type, { ...query, ...last.previousCursor, _count: String(count) }),
      scope,
    );
    backward.unshift(last.matches.map((m) => m.id));
  }
  return { forward, backward };
}

const SORTS: [string, Record<string, string>][] = [
  ['Observation', { _sort: 'date' }],
  ['Observation', { _sort: '-date' }],
  ['Observation', { _sort: 'value-quantity' }],
  ['Observation', { _sort: '-value-quantity' }],
  ['Observation', { _sort: '-date', code: `${LOINC}|8302-2` }],
  ['Observation', { _sort: 'date', subject: 'Patient/a-p7' }],
  ['Observation', { _sort: 'code' }],
  ['Observation', { _sort: '-subject' }],
  ['Patient', { _sort: 'family' }],
  ['Patient', { _sort: '-family' }],
];

describe.each(testDatabases())('one-key _sort on $name', (database) => {
  let db: Db;
  beforeAll(async () => {
    db = await database.open();
    // Another project's rows interleaved with ours, and deleted ones of ours with their index rows kept.
    const ours = Array.from({ length: N }, (_, i) => observation(i, 'a'));
    const theirs = Array.from({ length: N / 3 }, (_, i) => observation(i, 'b'));
    for (let k = 0; k < N; k += 500) {
      await insert(db, ours.slice(k, k + 500), 'a');
      await insert(db, theirs.slice(k / 3, (k + 500) / 3), 'b');
    }
    await insert(
      db,
      Array.from({ length: 200 }, (_, i) => observation(N + i, 'a')),
      'a',
      true,
    );
    await insert(
      db,
      Array.from({ length: 400 }, (_, i) => patient(i, 'a')),
      'a',
    );
    await insert(
      db,
      Array.from({ length: 400 }, (_, i) => patient(i, 'b')),
      'b',
    );
    await db.query('ANALYZE');
  }, 600_000);
  afterAll(async () => {
    await db?.close();
  });

  it('answers every page as the old plan did, forwards and backwards, with ties, missing values last, in one project', async () => {
    for (const [type, query] of SORTS) {
      const expected = await oldOrder(db, type, query);
      expect(expected.length, JSON.stringify(query)).toBeGreaterThan(20);
      expect(
        expected.every((id) => id.startsWith('a-')),
        JSON.stringify(query),
      ).toBe(true);
      const { forward, backward } = await pages(db, type, query, 97);
      expect(forward.flat(), JSON.stringify(query)).toEqual(expected);
      expect(backward.flat(), JSON.stringify(query)).toEqual(expected.slice(0, backward.flat().length));
      expect(backward.length, JSON.stringify(query)).toBe(forward.length - 1);
      const off = await executeSearch(
        db,
        parseSearchRequest(type, { ...query, _offset: '40', _count: '30' }),
        scope,
      );
      expect(off.matches.map((m) => m.id)).toEqual(expected.slice(40, 70));
    }
  });

  it('puts the resources without a value after the others, ascending and descending', async () => {
    for (const sort of ['date', '-date']) {
      const ids = await oldOrder(db, 'Observation', { _sort: sort });
      const undated = ids.filter((id) => Number(id.slice(3)) % 10 === 5);
      expect(ids.slice(ids.length - undated.length)).toEqual(undated);
    }
  });

  it('reads a page of a broad one-key _sort from the index, not every match', async () => {
    const cases: [string, Record<string, string>][] = [
      ['Observation', { _sort: 'date' }],
      ['Observation', { _sort: '-date' }],
      ['Observation', { _sort: '-value-quantity' }],
      ['Observation', { _sort: '-date', code: `${LOINC}|8302-2` }],
      ['Observation', { _sort: 'date', subject: 'Patient/a-p7' }],
      ['Patient', { _sort: 'family' }],
    ];
    for (const [type, query] of cases) {
      const { q, seen } = recordQueries(db, /FROM (resources|sp_)/);
      const r = await executeSearch(q, parseSearchRequest(type, { ...query, _count: '10' }), scope);
      expect(r.matches).toHaveLength(10);
      const page = seen.filter((s) => !/^SELECT count/.test(s.sql));
      for (const s of page) {
        for (const table of ['resources', 'sp_date', 'sp_quantity', 'sp_string', 'sp_reference']) {
          const read = await rowsRead(db, s, table);
          expect(read, `${JSON.stringify(query)} ${table}`).toBeLessThan(250);
        }
      }
    }
  });

  it('counts a broad match only up to the count limit, and estimates beyond it', async () => {
    for (const query of [{ _summary: 'count' }, { _total: 'accurate', code: `${LOINC}|8302-2` }]) {
      const { q, seen } = recordQueries(db, /count\(\*\)/);
      const req = parseSearchRequest('Observation', query);
      await expect(executeSearch(q, req, scope, { countLimit: 100 })).rejects.toThrow(
        /searchCountLimit is 100/,
      );
      expect(seen.length).toBeGreaterThan(0);
      for (const s of seen)
        expect(await rowsRead(db, s, 'resources'), JSON.stringify(query)).toBeLessThan(250);
    }
    const few = await executeSearch(
      db,
      parseSearchRequest('Observation', { _summary: 'count', subject: 'Patient/a-p7' }),
      scope,
      { countLimit: 100 },
    );
    expect(few.total).toBe(30);
    const est = await executeSearch(db, parseSearchRequest('Observation', { _total: 'estimate' }), scope, {
      countLimit: 100,
    });
    // The planner's estimate of our 3,000 live Observations (never below the limit it went past).
    expect(est.total).toBeGreaterThan(100);
    expect(est.total).toBeLessThan(30_000);
  });

  it('plans a broad _has from the page’s own rows, a narrow one from the referrers', async () => {
    const cases: [Record<string, string>, number][] = [
      [{ '_has:Observation:subject:code': `${LOINC}|8302-2` }, 50],
      [{ '_has:Observation:subject:code': `${LOINC}|7-9` }, 2],
    ];
    for (const [query, matches] of cases) {
      const { q, seen } = recordQueries(db, /FROM resources/);
      const all = await executeSearch(db, parseSearchRequest('Patient', { ...query, _count: '1000' }), scope);
      expect(all.matches, JSON.stringify(query)).toHaveLength(matches);
      expect(all.matches.every((m) => m.id.startsWith('a-p'))).toBe(true);
      const r = await executeSearch(q, parseSearchRequest('Patient', { ...query, _count: '5' }), scope);
      expect(r.matches.map((m) => m.id)).toEqual(all.matches.slice(0, 5).map((m) => m.id));
      // A narrow one: PostgreSQL reads a small table's reference rows whole, whichever side it starts from.
      if (matches < 10) continue;
      for (const s of seen) {
        const read = await Promise.all(
          ['resources', 'sp_reference', 'sp_token'].map((t) => rowsRead(db, s, t)),
        );
        // The old plan: every referrer of the code and every reference row of the table (a sequential scan).
        for (const n of read) expect(n, `${JSON.stringify(query)} ${read.join(' ')}`).toBeLessThan(1000);
      }
    }
  });

  it('answers :missing=false that matches nothing from the index, and :missing and :not as before', async () => {
    const { q, seen } = recordQueries(db, /FROM resources/);
    const none = await executeSearch(
      q,
      parseSearchRequest('Observation', { 'value-string:missing': 'false' }),
      scope,
    );
    expect(none.matches).toEqual([]);
    for (const s of seen) expect(await rowsRead(db, s, 'resources')).toBeLessThan(250);
    const ids = async (query: Record<string, string>): Promise<string[]> =>
      (
        await executeSearch(db, parseSearchRequest('Observation', { ...query, _count: '1000' }), scope)
      ).matches
        .map((m) => m.id)
        .sort();
    const all = Array.from({ length: N }, (_, i) => `a-o${i}`).sort();
    const undated = all.filter((id) => Number(id.slice(3)) % 10 === 5);
    expect(await ids({ 'date:missing': 'true' })).toEqual(undated.slice(0, 1000).sort());
    expect(await ids({ 'subject:missing': 'true' })).toEqual([]);
    expect(await ids({ 'status:not': 'final' })).toEqual([]);
    expect(await ids({ 'value-quantity:missing': 'false', 'date:missing': 'true' })).toEqual(
      undated.filter((id) => Number(id.slice(3)) % 7 !== 3).sort(),
    );
  });
});
