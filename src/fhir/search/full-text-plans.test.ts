// Full-text searches and token `:text` are answered from their indexes at any table size (migration 019): the plan
// reads sp_text through the GIN index of the column searched (`_text`: sp_text_narrative, `_content`:
// sp_text_content), and sp_token through sp_token_text for `:text` (before, every token row of the type was read: 2.3 s
// at 5 million). PostgreSQL only, as plans.test.ts; the words themselves are tested on both engines through HTTP
// (test/api/full-text.test.ts).
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
const scope = { projectId: 'plans' };

function observation(i: number): Resource {
  return {
    resourceType: 'Observation',
    id: `fo-${i}`,
    status: 'final',
    text: {
      status: 'generated',
      div: `<div xmlns="http://www.w3.org/1999/xhtml">Reading number n${i} of series s${i % 50}</div>`,
    },
    code: {
      coding: [{ system: 'http://loinc.org', code: `${i}-1`, display: `Analyte a${i} panel` }],
      text: `Analyte a${i}`,
    },
    note: [{ text: `Remark r${i} group g${i % 50}` }],
  };
}

const postgres = testDatabases().find((d) => d.name === 'postgres');

describe.runIf(postgres)(`full-text plans on ${N} resources on PostgreSQL`, () => {
  let db: Db;
  beforeAll(async () => {
    db = await (postgres as NonNullable<typeof postgres>).open();
    const all = Array.from({ length: N }, (_, i) => observation(i));
    for (let k = 0; k < all.length; k += 2000) {
      const batch = all.slice(k, k + 2000);
      await db.transaction(async (tx) => {
        const res = await tx.query<{ rid: number }>(
          `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
           SELECT x.resource_type, x.id, 'plans', 1, now(), false, x.content
           FROM jsonb_to_recordset($1::jsonb) AS x(resource_type text, id text, content jsonb) RETURNING rid`,
          [JSON.stringify(batch.map((r) => ({ resource_type: r.resourceType, id: r.id, content: r })))],
        );
        await writeIndex(
          tx,
          batch.map((resource, i) => ({ rid: Number(res.rows[i]?.rid), resource })),
        );
      });
    }
    // VACUUM also moves the GIN indexes' pending entries into the index proper, as autovacuum does in service.
    await db.query('VACUUM ANALYZE');
  }, 600_000);
  afterAll(async () => {
    await db?.close();
  });

  const plan = async (query: Record<string, string>, table: string) => {
    const req = parseSearchRequest('Observation', { _count: '20', ...query });
    const q = searchSql(req, scope);
    const access = await tableAccess(db, { sql: q.text, params: q.values }, table);
    const text = (await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${q.text}`, q.values)).rows
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    const found = (await executeSearch(db, req, scope)).matches.map((m) => m.id);
    return { access, text, found };
  };
  const indexed = (p: { access: string[]; text: string }, index: string): void => {
    expect(p.access.length, p.text).toBeGreaterThan(0);
    for (const a of p.access) expect(a, p.text).toMatch(/Index|Bitmap Heap Scan/);
    expect(p.text).toContain(index);
  };

  it('_text reads the narrative GIN index', async () => {
    const p = await plan({ _text: 'n4321' }, 'sp_text');
    indexed(p, 'sp_text_narrative');
    expect(p.found).toEqual(['fo-4321']);
  });

  it('_content reads the content GIN index, words AND’ed and OR’ed', async () => {
    // r77 (and analyte): 77; s49 and a word starting with n99: 99 and 999 (99, 990..999 end in 49 modulo 50 there).
    const p = await plan({ _content: 'r77 analyte,s49 n99*' }, 'sp_text');
    indexed(p, 'sp_text_content');
    expect(p.found.sort()).toEqual(['fo-77', 'fo-99', 'fo-999']);
  });

  it('token :text reads the text index by prefix, never every token row', async () => {
    const p = await plan({ 'code:text': 'analyte a432' }, 'sp_token');
    indexed(p, 'sp_token_text');
    expect(p.found.sort()).toEqual(['fo-432', ...Array.from({ length: 10 }, (_, i) => `fo-432${i}`)].sort());
  });
});
