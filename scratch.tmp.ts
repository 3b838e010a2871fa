import { openPostgres } from './src/storage/postgres.js';
import { migrate } from './src/storage/migrate.js';
import { writeIndex } from './src/fhir/search/index-writer.js';
import { searchSql, countSql } from './src/fhir/search/sql.js';
import { parseSearchRequest } from './src/fhir/search/parse.js';
import type { Resource } from './src/fhir/types.js';
const url = process.env.SCRATCH_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = process.env.SCRATCH_SCHEMA ?? 'scratch_missing';
const admin = await openPostgres(url, { max: 1 });
const fresh = process.argv[2] === 'fill';
if (fresh) { await admin.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`); await admin.exec(`CREATE SCHEMA ${schema}`); }
await admin.close();
const db = await openPostgres(url, { schema, max: 1 });
if (fresh) {
  await migrate(db);
  const obs = (i: number, project: string): Resource => { const rare = i % 500 === 7; return { resourceType: 'Observation', id: `${project}-o${i}`, status: rare ? 'amended' : 'final', code: { coding: [{ system: 'http://loinc.org', code: i % 2 === 0 ? '8302-2' : `${i % 50}-9` }] }, ...(rare ? {} : { subject: { reference: `Patient/${project}-p${i % 100}` } }), effectiveDateTime: `2020-01-${String((i % 28) + 1).padStart(2, '0')}` }; };
  for (let k = 0; k < 3000; k += 500) for (const [p, list] of [['a', Array.from({ length: 500 }, (_, i) => obs(k + i, 'a'))], ['b', Array.from({ length: 100 }, (_, i) => obs(k / 5 + i, 'b'))]] as const) {
    await db.transaction(async (tx) => {
      const res = await tx.query<{ rid: number; id: string }>(`INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content) SELECT x.resource_type, x.id, $2, 1, now(), false, x.content FROM jsonb_to_recordset($1::jsonb) AS x(resource_type text, id text, content jsonb) RETURNING rid, id`, [JSON.stringify(list.map((r) => ({ resource_type: r.resourceType, id: r.id, content: r }))), p]);
      const rid = new Map(res.rows.map((r) => [r.id, Number(r.rid)]));
      await writeIndex(tx, list.map((resource) => ({ rid: rid.get(resource.id as string) as number, resource })));
    });
  }
  await db.query('ANALYZE');
} else {
  const [, , , type, qs, count] = process.argv;
  const req = parseSearchRequest(type!, Object.fromEntries(new URLSearchParams(qs)));
  const q = count ? countSql(req, { projectId: process.env.SCRATCH_PROJECT ?? 'a' }, 101) : searchSql(req, { projectId: process.env.SCRATCH_PROJECT ?? 'a' });
  console.log(q.text);
  const r = await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE) ${q.text}`, q.values);
  console.log(r.rows.map((x) => x['QUERY PLAN']).join('\n'));
}
await db.close();
