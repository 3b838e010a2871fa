// Migration 027 on a database written by earlier versions: the `<code>$<k>` rows of the composites now read from other
// rows (composite-sources.ts) are deleted, the other composites' rows stay, and every composite search answers as it
// did before, on old and new resources alike.
import { afterEach, describe, expect, it } from 'vitest';
import type { Queryable } from '../db.js';
import { migrate, MIGRATIONS } from '../migrate.js';
import { executeSearch } from '../../fhir/search/execute.js';
import { INDEX_TABLES, rewriteIndexTables } from '../../fhir/search/index-writer.js';
import { parseSearchRequest } from '../../fhir/search/parse.js';
import type { Resource } from '../../fhir/types.js';
import * as m027 from './027-narrower-token-rows.js';
import { derivedComposites } from '../../fhir/search/composite-sources.js';
import { resourceTypes, searchParamsOf } from '../../fhir/search/registry.js';
import { unionOf } from '../../fhir/search/union-params.js';
import { bareDatabases } from '../../../test/support/db.js';
import {
  insertOldCompositeRows,
  insertOldSystems,
  insertOldUnionRows,
  systemOfKey,
} from '../../../test/support/old-index-rows.js';
import { SYSTEM_PREFIXES, systemKey } from '../../fhir/search/system-key.js';

const databases = bareDatabases(2);

const PROJECT = 'p027';
const scope = { projectId: PROJECT };
const LOINC = 'http://loinc.org';
const SNOMED = 'http://snomed.info/sct';

/** Stores resources and their index rows as store.ts does (resources, then the index); answers their rids. */
async function store(db: Queryable, resources: Resource[]): Promise<{ rid: number; resource: Resource }[]> {
  const out: { rid: number; resource: Resource }[] = [];
  for (const resource of resources) {
    const r = await db.query<{ rid: string }>(
      `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, content)
       VALUES ($1, $2, $3, 1, now(), $4::json) RETURNING rid`,
      [resource.resourceType, resource.id, PROJECT, JSON.stringify(resource)],
    );
    const rid = Number(r.rows[0]?.rid);
    // Every index table but sp_missing (which a later migration, 028 on main, adds).
    await rewriteIndexTables(
      db,
      [{ rid, resource }],
      INDEX_TABLES.filter((t) => t !== 'sp_missing'),
    );
    out.push({ rid, resource });
  }
  return out;
}

const code = (c: string): object => ({ coding: [{ system: LOINC, code: c, display: `code ${c}` }] });
const mmHg = (value: number): object => ({
  value,
  unit: 'mmHg',
  system: 'http://unitsofmeasure.org',
  code: 'mm[Hg]',
});

const bp = (id: string, systolic: number, diastolic: number): Resource => ({
  resourceType: 'Observation',
  id,
  status: 'final',
  code: code('85354-9'),
  component: [
    { code: code('8480-6'), valueQuantity: mmHg(systolic) },
    { code: code('8462-4'), valueQuantity: mmHg(diastolic) },
  ],
});
const single = (id: string, c: string, value: number): Resource => ({
  resourceType: 'Observation',
  id,
  status: 'final',
  code: code(c),
  valueQuantity: mmHg(value),
});
const smoker = (id: string, answer: string): Resource => ({
  resourceType: 'Observation',
  id,
  status: 'final',
  code: code('72166-2'),
  valueCodeableConcept: { coding: [{ system: SNOMED, code: answer }] },
});
const text = (id: string): Resource => ({
  resourceType: 'Observation',
  id,
  status: 'final',
  code: code('x-1'),
  valueString: 'kept',
  identifier: [
    {
      system: 'urn:oid:1.2.3',
      value: 'I-7',
      type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0203', code: 'MR' }] },
    },
  ],
  category: [{ coding: [{ system: '\u0004odd', code: 'c' }] }],
});

const ids = async (db: Queryable, query: Record<string, string>): Promise<string[]> => {
  const r = await executeSearch(db, parseSearchRequest('Observation', query), scope);
  return r.matches.map((e) => e.id as string).sort();
};

/** Composite searches and their answers, on the old resources (o*) and on one written after the migration (n*). */
const SEARCHES: [Record<string, string>, string[]][] = [
  [{ 'code-value-quantity': `${LOINC}|8480-6$gt125` }, ['n1', 'o3']],
  [{ 'code-value-quantity': '8480-6$lt200' }, ['n1', 'o3', 'o4']],
  [{ 'code-value-quantity': '8867-4$gt1' }, []],
  [{ 'code-value-concept': `72166-2$${SNOMED}|8517006` }, ['o5']],
  [{ 'code-value-concept': '72166-2$266919005,72166-2$8517006' }, ['o5', 'o6']],
  // combo-: the Observation's own code and value, or one component's.
  [{ 'combo-code-value-quantity': '8480-6$gt125' }, ['n1', 'n2', 'o1', 'o3']],
  [{ 'combo-code-value-quantity': '8462-4$gt125' }, []],
  [{ 'combo-code-value-quantity': '8462-4$90' }, ['o2']],
  [{ 'combo-code-value-concept': '72166-2$266919005' }, ['o6']],
  [{ 'component-code-value-quantity': '8480-6$gt125' }, ['n2', 'o1']],
  [{ 'code-value-string': 'x-1$kept' }, ['o7']],
  // Union parameters: the Observation's own or a component's code and value.
  [{ 'combo-code': `${LOINC}|8480-6` }, ['n1', 'n2', 'o1', 'o2', 'o3', 'o4']],
  [{ 'combo-code': '85354-9,72166-2' }, ['n2', 'o1', 'o2', 'o5', 'o6']],
  [{ 'combo-code:text': 'code 8462' }, ['n2', 'o1', 'o2']],
  [{ 'combo-code:missing': 'true' }, []],
  [{ 'combo-code:not': '8480-6' }, ['o5', 'o6', 'o7']],
  [{ 'combo-value-quantity': 'gt125' }, ['n1', 'n2', 'o1', 'o3']],
  [{ 'combo-value-quantity:missing': 'true' }, ['o5', 'o6', 'o7']],
  [{ 'combo-value-concept': '8517006' }, ['o5']],
  [{ 'combo-code': `${LOINC}|8462-4`, _count: '1' }, ['o1']],
  [{ 'combo-code': `${LOINC}|8480-6`, _sort: '-combo-code' }, ['n1', 'n2', 'o1', 'o2', 'o3', 'o4']],
  // Searches by code system.
  [{ code: `${LOINC}|8480-6` }, ['n1', 'o3', 'o4']],
  [{ code: `${LOINC}|` }, ['n1', 'n2', 'o1', 'o2', 'o3', 'o4', 'o5', 'o6', 'o7']],
  [{ code: 'http://loinc.org/|8480-6' }, []],
  [{ 'value-quantity': '140|http://unitsofmeasure.org|mm[Hg]' }, ['o3']],
  [{ 'value-concept': `${SNOMED}|8517006` }, ['o5']],
  [{ identifier: 'urn:oid:1.2.3|I-7' }, ['o7']],
  [{ 'identifier:of-type': 'http://terminology.hl7.org/CodeSystem/v2-0203|MR|I-7' }, ['o7']],
  [{ category: '\u0004odd|c' }, ['o7']],
  [{ category: `${LOINC}|c` }, []],
];

describe.each(databases)('migration 027 on $name', (database) => {
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => cleanup?.());

  it('deletes the rows of composites read from other rows, stores systems as keys, and searches find old and new rows', async () => {
    const { db, drop } = await database.open();
    cleanup = async () => {
      await db.close();
      await drop();
    };
    await migrate(
      db,
      MIGRATIONS.filter((m) => m.version < 27),
    );
    const old = await store(db, [
      bp('o1', 130, 85),
      bp('o2', 120, 90),
      single('o3', '8480-6', 140),
      single('o4', '8480-6', 110),
      smoker('o5', '8517006'),
      smoker('o6', '266919005'),
      text('o7'),
    ]);
    // As the writer before migration 027 wrote them.
    expect(await insertOldCompositeRows(db, old)).toBeGreaterThan(20);
    expect(await insertOldUnionRows(db, old)).toBeGreaterThan(10);
    expect(await insertOldSystems(db)).toBeGreaterThan(20);
    const unions = async (): Promise<number> => {
      const r = await db.query<{ n: number }>(
        `SELECT (SELECT count(*) FROM sp_token WHERE code LIKE 'combo-%' AND grp IS NULL)::int
              + (SELECT count(*) FROM sp_quantity WHERE code LIKE 'combo-%' AND grp IS NULL)::int AS n`,
      );
      return r.rows[0]?.n as number;
    };
    expect(await unions()).toBe(11 + 6 + 2); // combo-code, combo-value-quantity, combo-value-concept
    const systems = async (): Promise<string[]> => {
      const r = await db.query<{ s: string }>(
        `SELECT system AS s FROM sp_token UNION SELECT system FROM sp_quantity UNION SELECT system FROM sp_identifier
         UNION SELECT type_system FROM sp_identifier ORDER BY 1`,
      );
      return r.rows.map((x) => x.s).filter((x) => x !== null);
    };
    const raw = await systems();
    expect(raw).toContain('http://loinc.org');
    expect(raw).toContain('\u0004odd');
    const count = async (): Promise<Record<string, number>> => {
      const r = await db.query<{ code: string; n: number }>(
        `SELECT code, count(*)::int AS n FROM (SELECT code FROM sp_token WHERE grp IS NOT NULL
         UNION ALL SELECT code FROM sp_quantity WHERE grp IS NOT NULL) x GROUP BY code ORDER BY code`,
      );
      return Object.fromEntries(r.rows.map((x) => [x.code, x.n]));
    };
    expect(await count()).toEqual({
      'code-value-concept$0': 2,
      'code-value-concept$1': 2,
      'code-value-quantity$0': 2,
      'code-value-quantity$1': 2,
      'code-value-string$0': 1,
      'combo-code-value-concept$0': 2,
      'combo-code-value-concept$1': 2,
      'combo-code-value-quantity$0': 6,
      'combo-code-value-quantity$1': 6,
      'component-code-value-quantity$0': 4,
      'component-code-value-quantity$1': 4,
    });
    expect(await migrate(db)).toEqual(MIGRATIONS.filter((m) => m.version >= 27).map((m) => m.version));
    // Only the rows of the composites that are read from elsewhere are gone.
    expect(await count()).toEqual({
      'code-value-string$0': 1,
      'component-code-value-quantity$0': 4,
      'component-code-value-quantity$1': 4,
    });
    const string = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM sp_string WHERE grp IS NOT NULL`,
    );
    expect(string.rows[0]?.n).toBe(1);
    expect(await unions()).toBe(0);
    // Code systems are stored as their keys.
    expect(await systems()).toEqual(raw.map((x) => systemKey(x)).sort());
    expect((await systems()).map(systemOfKey).sort()).toEqual(raw);
    // The old resources are found as the searches say (the reader needs the migrated rows: it looks for keys).
    for (const [q, expected] of SEARCHES)
      expect(await ids(db, q), JSON.stringify(q)).toEqual(expected.filter((id) => id.startsWith('o')));

    // Written after it: no rows of those composites, and the same answers for old and new resources.
    await store(db, [single('n1', '8480-6', 150), bp('n2', 128, 80)]);
    expect(await count()).toEqual({
      'code-value-string$0': 1,
      'component-code-value-quantity$0': 6,
      'component-code-value-quantity$1': 6,
    });
    for (const [q, expected] of SEARCHES) expect(await ids(db, q), JSON.stringify(q)).toEqual(expected);
  });
});

describe.each(databases)('migration 027 system keys on $name', (database) => {
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => cleanup?.());

  it('encodes as systemKey does', async () => {
    const { db, drop } = await database.open();
    cleanup = async () => {
      await db.close();
      await drop();
    };
    const samples = [
      ...SYSTEM_PREFIXES,
      ...SYSTEM_PREFIXES.map((p) => `${p}x/y`),
      'http://loinc.orgx',
      'HTTP://loinc.org',
      'phone',
      '',
      '\u0001',
      '\u001fa',
      '\u0004odd',
      'é://x',
      'urn:uuid:1',
    ];
    const r = await db.query<{ k: string }>(
      `SELECT ${m027.encoded('s')} AS k FROM unnest($1::text[]) WITH ORDINALITY AS u(s, n) ORDER BY n`,
      [samples],
    );
    expect(r.rows.map((x) => x.k)).toEqual(samples.map((s) => systemKey(s)));
  });
});

describe('migration 027 codes', () => {
  it('deletes the rows of exactly the union parameters the index writer no longer writes', () => {
    const found = [...resourceTypes()]
      .flatMap((t) =>
        searchParamsOf(t)
          .filter((p) => unionOf(t, p.code))
          .map((p) => `${t} ${p.code}`),
      )
      .sort();
    const deleted = [...m027.sql.matchAll(/'(combo-[a-z-]+)'/g)]
      .map((m) => `Observation ${m[1] as string}`)
      .sort();
    expect(found).toEqual(deleted);
    expect(unionOf('Observation', 'combo-code')).toEqual(['code', 'component-code']);
  });

  it('encodes with the prefixes of system-key.ts', () => {
    expect([...m027.PREFIXES]).toEqual(SYSTEM_PREFIXES.slice(0, m027.PREFIXES.length));
  });

  it('deletes the rows of exactly the composites the index writer no longer writes', () => {
    const deleted = [...m027.sql.matchAll(/'([a-z-]+)\$(\d)'/g)].map((m) => m[1] as string);
    expect([...new Set(deleted)].sort()).toEqual([...derivedComposites('Observation')].sort());
  });
});
