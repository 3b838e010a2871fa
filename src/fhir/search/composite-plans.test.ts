// Composites read from the ordinary rows (composite-sources.ts, migration 027) are answered from the value indexes at
// any table size: the component on the resource's own `code` through sp_token_value, its value by rid, and a combo-
// composite's components through the `component-` composite's rows. No rows of their own exist. PostgreSQL only, as
// plans.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../../test/support/db.js';
import { tableAccess } from '../../../test/support/plans.js';
import type { Db } from '../../storage/db.js';
import type { Resource } from '../types.js';
import { executeSearch } from './execute.js';
import { writeIndex } from './index-writer.js';
import { parseSearchRequest } from './parse.js';
import { searchSql } from './sql.js';

const N = 6000;
const LOINC = 'http://loinc.org';
const SNOMED = 'http://snomed.info/sct';
const scope = { projectId: 'cplans' };
const code = (c: string): object => ({ coding: [{ system: LOINC, code: c }] });
const qty = (value: number): object => ({ value, system: 'http://unitsofmeasure.org', code: 'mm[Hg]' });

function resourceAt(i: number): Resource {
  const base = { resourceType: 'Observation', id: `co-${i}`, status: 'final' };
  if (i % 3 === 0)
    return {
      ...base,
      code: code('85354-9'),
      component: [
        { code: code('8480-6'), valueQuantity: qty(100 + (i % 50)) },
        { code: code('8462-4'), valueQuantity: qty(60 + (i % 40)) },
      ],
    } as Resource;
  if (i % 3 === 1) return { ...base, code: code(`${i % 600}-1`), valueQuantity: qty(i % 199) } as Resource;
  return {
    ...base,
    code: code(`${i % 600}-2`),
    valueCodeableConcept: { coding: [{ system: SNOMED, code: `${i % 7}` }] },
  } as Resource;
}

const postgres = testDatabases().find((d) => d.name === 'postgres');

describe.runIf(postgres)(`composite plans on ${N} Observations on PostgreSQL`, () => {
  let db: Db;
  beforeAll(async () => {
    db = await (postgres as NonNullable<typeof postgres>).open();
    const all = Array.from({ length: N }, (_, i) => resourceAt(i));
    for (let k = 0; k < all.length; k += 2000) {
      const batch = all.slice(k, k + 2000);
      await db.transaction(async (tx) => {
        const res = await tx.query<{ rid: number }>(
          `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
           SELECT x.resource_type, x.id, 'cplans', 1, now(), false, x.content
           FROM jsonb_to_recordset($1::jsonb) AS x(resource_type text, id text, content jsonb) RETURNING rid`,
          [JSON.stringify(batch.map((r) => ({ resource_type: r.resourceType, id: r.id, content: r })))],
        );
        await writeIndex(
          tx,
          batch.map((resource, i) => ({ rid: Number(res.rows[i]?.rid), resource })),
        );
      });
    }
    await db.query('ANALYZE');
  }, 600_000);
  afterAll(async () => {
    await db?.close();
  });

  const plan = async (query: Record<string, string>) => {
    const req = parseSearchRequest('Observation', { _count: '1000', ...query });
    const q = searchSql(req, scope);
    const text = (await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${q.text}`, q.values)).rows
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    const access = {
      token: await tableAccess(db, { sql: q.text, params: q.values }, 'sp_token'),
      quantity: await tableAccess(db, { sql: q.text, params: q.values }, 'sp_quantity'),
    };
    const found = (await executeSearch(db, req, scope)).matches.map((m) => m.id as string).sort();
    return { text, access, found };
  };
  const indexOnly = (scans: string[], text: string): void => {
    for (const a of scans) expect(a, text).toMatch(/Index|Bitmap Heap Scan/);
  };
  const expected = (pred: (i: number) => boolean): string[] =>
    Array.from({ length: N }, (_, i) => i)
      .filter(pred)
      .map((i) => `co-${i}`)
      .sort();

  it('writes no rows of its own for the composites read from other rows', async () => {
    const r = await db.query<{ code: string }>(
      `SELECT DISTINCT code FROM sp_token WHERE grp IS NOT NULL
       UNION SELECT DISTINCT code FROM sp_quantity WHERE grp IS NOT NULL ORDER BY 1`,
    );
    expect(r.rows.map((x) => x.code)).toEqual([
      'component-code-value-quantity$0',
      'component-code-value-quantity$1',
    ]);
  });

  it('writes no rows for union parameters (combo-code: code and component-code)', async () => {
    const r = await db.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM sp_token WHERE code LIKE 'combo-%')::int
            + (SELECT count(*) FROM sp_quantity WHERE code LIKE 'combo-%')::int AS n`,
    );
    expect(r.rows[0]?.n).toBe(0);
  });

  it('combo-code alone pages in rid order through the value index of each of its parts, merged', async () => {
    const p = await plan({ 'combo-code': `${LOINC}|8480-6`, _count: '20' });
    indexOnly(p.access.token, p.text);
    expect(p.access.token.length, p.text).toBeGreaterThanOrEqual(2);
    expect(p.text).toContain('sp_token_value');
    expect(p.text).toMatch(/code = 'component-code'::text/);
    expect(p.text).toMatch(/Limit/);
    // The first 20 blood pressures (each has 8480-6 as a component), in the order they were written.
    const first = Array.from({ length: 20 }, (_, k) => `co-${3 * k}`).sort();
    expect(p.found).toEqual(first);
    const both = await plan({ 'combo-code': `${LOINC}|7-1` });
    expect(both.found).toEqual(expected((i) => i % 3 === 1 && i % 600 === 7));
  });

  it('code-value-quantity reads the ordinary code rows through the token value index', async () => {
    const p = await plan({ 'code-value-quantity': `${LOINC}|7-1$lt12` });
    expect(p.access.token.length, p.text).toBe(1);
    indexOnly([...p.access.token, ...p.access.quantity], p.text);
    expect(p.text).toContain('sp_token_value');
    expect(p.text).toMatch(/code = 'code'::text/);
    expect(p.text).toMatch(/code = 'value-quantity'::text/);
    expect(p.found).toEqual(expected((i) => i % 3 === 1 && i % 600 === 7 && i % 199 < 12));
    expect(p.found.length).toBeGreaterThan(0);
  });

  it('code-value-concept reads both components through the token value index', async () => {
    const p = await plan({ 'code-value-concept': `${LOINC}|8-2$${SNOMED}|1` });
    indexOnly(p.access.token, p.text);
    expect(p.text).toMatch(/code = 'value-concept'::text/);
    expect(p.found).toEqual(expected((i) => i % 3 === 2 && i % 600 === 8 && i % 7 === 1));
    expect(p.found.length).toBeGreaterThan(0);
  });

  it('combo-code-value-quantity reads the resource rows and the component composite rows through indexes', async () => {
    const p = await plan({ 'combo-code-value-quantity': `${LOINC}|8480-6$gt145` });
    indexOnly([...p.access.token, ...p.access.quantity], p.text);
    expect(p.text).toMatch(/code = 'component-code-value-quantity\$0'::text/);
    expect(p.text).toMatch(/code = 'code'::text/);
    expect(p.found).toEqual(expected((i) => i % 3 === 0 && 100 + (i % 50) > 145));
    expect(p.found.length).toBeGreaterThan(0);
  });
});
