// `:missing` and `:not` answered from sp_missing (migration 028, missing.ts): the same answers as the anti-joins they
// replace, on token, reference, string, date and quantity parameters, with resources without the parameter, several
// values, one reference shared by a wider and a narrower parameter, another project's and deleted rows, writes that
// add or remove a value, and the anti-join while the index backfill of sp_missing is pending. On each test database.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../../test/support/db.js';
import type { Db, Queryable } from '../../storage/db.js';
import { paramIds } from '../../storage/migrations/028-param-codes.js';
import type { Resource } from '../types.js';
import { executeSearch } from './execute.js';
import { reindexResources, writeIndex } from './index-writer.js';
import { absentIdOf } from './missing.js';
import { planMissing } from './missing-plan.js';
import { parseSearchRequest } from './parse.js';

const LOINC = 'http://loinc.org';
const OTHER = 'http://other.org/codes';
const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';

const obs = (id: string, fields: Record<string, unknown>): Resource => ({
  resourceType: 'Observation',
  id,
  ...fields,
});
const code = (...codings: [string | undefined, string][]) => ({
  code: { coding: codings.map(([system, c]) => ({ ...(system ? { system } : {}), code: c })) },
});

const ours: Resource[] = [
  obs('o-full', {
    status: 'final',
    ...code([LOINC, '1-1']),
    subject: { reference: 'Patient/p1' },
    effectiveDateTime: '2020-01-01',
    valueString: 'abc',
    category: [{ coding: [{ system: CAT, code: 'vital-signs' }] }],
  }),
  obs('o-bare', { status: 'final', ...code([LOINC, '3-3']) }),
  // Several values: two categories, two codings, a subject that is no Patient (`patient` absent, `subject` not).
  obs('o-multi', {
    status: 'final',
    ...code([LOINC, '1-1'], [OTHER, '2-2']),
    subject: { reference: 'Group/g1' },
    effectivePeriod: { start: '2020-01-01', end: '2020-02-01' },
    category: [
      { coding: [{ system: CAT, code: 'vital-signs' }] },
      { coding: [{ system: CAT, code: 'laboratory' }] },
    ],
  }),
  // The same code in another system, and with none.
  obs('o-other', { status: 'amended', ...code([OTHER, '1-1']), subject: { reference: 'Patient/p2' } }),
  obs('o-nosys', { status: 'final', ...code([undefined, '1-1']), valueQuantity: { value: 3, unit: 'cm' } }),
  // No status at all (invalid R4, but stored rows may lack any value).
  obs('o-nostatus', {
    ...code([LOINC, '4-4']),
    category: [{ coding: [{ system: CAT, code: 'laboratory' }] }],
  }),
  { resourceType: 'Patient', id: 'p1', name: [{ family: 'One' }], birthDate: '1970-01-01' },
  { resourceType: 'Patient', id: 'p2', gender: 'male' },
];
// Another project's and a deleted Observation, both without anything but a code: never found.
const theirs: Resource[] = [obs('o-theirs', { ...code([LOINC, '9-9']) })];
const gone: Resource[] = [obs('o-gone', { ...code([LOINC, '9-9']) })];

async function insert(db: Queryable, resources: Resource[], project: string, deleted = false): Promise<void> {
  for (const resource of resources) {
    const r = await db.query<{ rid: string }>(
      `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
       VALUES ($1, $2, $3, 1, now(), $4, $5::json) RETURNING rid`,
      [resource.resourceType, resource.id, project, deleted, JSON.stringify(resource)],
    );
    await writeIndex(db, [{ rid: Number(r.rows[0]?.rid), resource }]);
  }
}

/** Every case with its answer (the anti-join's, as it answered before migration 028), in project m1. */
const CASES: [string, Record<string, string>, string[]][] = [
  ['Observation', { 'subject:missing': 'true' }, ['o-bare', 'o-nostatus', 'o-nosys']],
  ['Observation', { 'subject:missing': 'false' }, ['o-full', 'o-multi', 'o-other']],
  ['Observation', { 'patient:missing': 'true' }, ['o-bare', 'o-multi', 'o-nostatus', 'o-nosys']],
  ['Observation', { 'patient:missing': 'false' }, ['o-full', 'o-other']],
  [
    'Observation',
    { 'value-string:missing': 'true' },
    ['o-bare', 'o-multi', 'o-nostatus', 'o-nosys', 'o-other'],
  ],
  ['Observation', { 'value-string:missing': 'false' }, ['o-full']],
  ['Observation', { 'date:missing': 'true' }, ['o-bare', 'o-nostatus', 'o-nosys', 'o-other']],
  ['Observation', { 'date:missing': 'false' }, ['o-full', 'o-multi']],
  ['Observation', { 'status:missing': 'true' }, ['o-nostatus']],
  ['Observation', { 'category:missing': 'true' }, ['o-bare', 'o-nosys', 'o-other']],
  [
    'Observation',
    { 'value-quantity:missing': 'true', 'date:missing': 'true' },
    ['o-bare', 'o-nostatus', 'o-other'],
  ],
  ['Observation', { 'subject:missing': 'true', code: `${LOINC}|3-3` }, ['o-bare']],
  ['Patient', { 'name:missing': 'true' }, ['p2']],
  ['Patient', { 'birthdate:missing': 'true' }, ['p2']],
  ['Patient', { 'gender:missing': 'true' }, ['p1']],
  // :not: another value or none; a resource with the value among others is not a match.
  ['Observation', { 'status:not': 'final' }, ['o-nostatus', 'o-other']],
  ['Observation', { 'status:not': 'final,amended' }, ['o-nostatus']],
  [
    'Observation',
    { 'status:not': 'cancelled' },
    ['o-bare', 'o-full', 'o-multi', 'o-nostatus', 'o-nosys', 'o-other'],
  ],
  ['Observation', { 'code:not': '1-1' }, ['o-bare', 'o-nostatus']],
  ['Observation', { 'code:not': `${LOINC}|1-1` }, ['o-bare', 'o-nostatus', 'o-nosys', 'o-other']],
  ['Observation', { 'code:not': '|1-1' }, ['o-bare', 'o-full', 'o-multi', 'o-nostatus', 'o-other']],
  ['Observation', { 'code:not': `${LOINC}|1-1,${OTHER}|1-1` }, ['o-bare', 'o-nostatus', 'o-nosys']],
  ['Observation', { 'code:not': `${LOINC}|1-1,|1-1` }, ['o-bare', 'o-nostatus', 'o-other']],
  ['Observation', { 'code:not': `${OTHER}|2-2,${LOINC}|3-3,4-4` }, ['o-full', 'o-nosys', 'o-other']],
  // A system without a code is no range of the value index: the anti-join, as before.
  ['Observation', { 'code:not': `${OTHER}|` }, ['o-bare', 'o-full', 'o-nostatus', 'o-nosys']],
  ['Observation', { 'category:not': `${CAT}|vital-signs` }, ['o-bare', 'o-nostatus', 'o-nosys', 'o-other']],
  ['Observation', { 'category:not': 'laboratory', 'subject:missing': 'false' }, ['o-full', 'o-other']],
];

const scope = { projectId: 'm1' };

async function ids(db: Queryable, type: string, query: Record<string, string>): Promise<string[]> {
  const r = await executeSearch(db, parseSearchRequest(type, { ...query, _count: '100' }), scope);
  return r.matches.map((m) => m.id).sort();
}

describe.each(testDatabases())(':missing and :not from sp_missing on $name', (database) => {
  let db: Db;
  beforeAll(async () => {
    db = await database.open();
    await insert(db, ours, 'm1');
    await insert(db, theirs, 'm2');
    await insert(db, gone, 'm1', true);
  }, 120_000);
  afterAll(async () => {
    await db?.close();
  });

  it('answers as the anti-joins did', async () => {
    for (const [type, query, expected] of CASES)
      expect(await ids(db, type, query), `${type} ${JSON.stringify(query)}`).toEqual(expected);
  });

  it('answers them from their candidates (few here), but a `system|` :not by the anti-join', async () => {
    const marked = async (type: string, query: Record<string, string>): Promise<boolean[]> =>
      (await planMissing(db, parseSearchRequest(type, query))).filters
        .filter((f) => f.missing === true || f.modifier === 'not')
        .map((f) => f.fromCandidates === true);
    for (const [type, query] of CASES) {
      const expected = !Object.values(query).some((v) => v.endsWith('|'));
      for (const m of await marked(type, query)) expect(m, JSON.stringify(query)).toBe(expected);
    }
  });

  it('records per resource the ids of the built-in parameters it has no value of', async () => {
    const r = await db.query<{ id: string; codes: string[] }>(
      `SELECT x.id, (SELECT array_agg(d.code ORDER BY d.code) FROM sp_param_ids d WHERE d.id = ANY(m.absent)) AS codes
       FROM resources x JOIN sp_missing m ON m.rid = x.rid WHERE x.id IN ('o-full', 'o-multi')`,
    );
    const codes = new Map(r.rows.map((row) => [row.id, row.codes]));
    expect(codes.get('o-full')).toContain('value-quantity');
    expect(codes.get('o-full')).not.toContain('subject');
    expect(codes.get('o-full')).not.toContain('patient');
    expect(codes.get('o-multi')).toContain('patient');
    expect(codes.get('o-multi')).not.toContain('subject');
    expect(codes.get('o-multi')).not.toContain('category');
    // The dictionary in the database is the one the code reads.
    const dict = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM sp_param_ids');
    expect(dict.rows[0]?.n).toBe(paramIds().length);
    expect(absentIdOf('Observation', 'subject')).toBe(
      paramIds().find(([, t, c]) => t === 'Observation' && c === 'subject')?.[0],
    );
  });

  it('follows writes: a value added, then removed again', async () => {
    const setContent = async (id: string, resource: Resource): Promise<void> => {
      const r = await db.query<{ rid: string }>(
        `UPDATE resources SET content = $2::json WHERE id = $1 AND project_id = 'm1' RETURNING rid`,
        [id, JSON.stringify(resource)],
      );
      await db.transaction((tx) => reindexResources(tx, [Number(r.rows[0]?.rid)]));
    };
    const bare = ours.find((r) => r.id === 'o-bare') as Resource;
    await setContent('o-bare', { ...bare, subject: { reference: 'Patient/p1' }, status: 'cancelled' });
    expect(await ids(db, 'Observation', { 'subject:missing': 'true' })).toEqual(['o-nostatus', 'o-nosys']);
    expect(await ids(db, 'Observation', { 'status:not': 'final' })).toEqual([
      'o-bare',
      'o-nostatus',
      'o-other',
    ]);
    await setContent('o-bare', bare);
    for (const [type, query, expected] of CASES)
      expect(await ids(db, type, query), `${type} ${JSON.stringify(query)}`).toEqual(expected);
  });

  it('answers by the anti-join while the index backfill is pending, from sp_missing once it is done', async () => {
    // As after migration 028 on a database that held these resources: no sp_missing rows for rids past the
    // backfill's checkpoint.
    const rids = (await db.query<{ rid: string }>('SELECT rid FROM resources ORDER BY rid')).rows.map((r) =>
      Number(r.rid),
    );
    const upto = rids[rids.length - 1] as number;
    const checkpoint = rids[2] as number;
    await db.query('DELETE FROM sp_missing WHERE rid > $1', [checkpoint]);
    await db.query(
      `INSERT INTO index_backfills (table_name, resource_type, upto, checkpoint) VALUES ('sp_missing', NULL, $1, $2)`,
      [upto, checkpoint],
    );
    try {
      for (const [type, query, expected] of CASES)
        expect(await ids(db, type, query), `${type} ${JSON.stringify(query)}`).toEqual(expected);
      // Done, but rows missing past its range: they are no longer read (the backfill's word is trusted).
      await db.query(`UPDATE index_backfills SET state = 'done' WHERE table_name = 'sp_missing'`);
      expect(await ids(db, 'Observation', { 'subject:missing': 'true' })).not.toEqual(CASES[0]?.[2]);
    } finally {
      await db.query(`DELETE FROM index_backfills WHERE table_name = 'sp_missing'`);
      await db.transaction((tx) => reindexResources(tx, rids));
    }
    for (const [type, query, expected] of CASES)
      expect(await ids(db, type, query), `${type} ${JSON.stringify(query)}`).toEqual(expected);
  });
});
