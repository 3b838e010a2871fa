// Migration 025 on a database written by earlier versions: reference rows that still hold their target's type and id,
// and composite token rows that still hold text, give the same answers after it as rows written from then on; the
// `:text` index leaves composite rows out; references that name no resource here (more than one slash) stay unmatched
// by `_include` and `_has`.
import { afterEach, describe, expect, it } from 'vitest';
import type { Queryable } from '../db.js';
import { migrate, MIGRATIONS } from '../migrate.js';
import { executeSearch } from '../../fhir/search/execute.js';
import { INDEX_TABLES, rewriteIndexTables } from '../../fhir/search/index-writer.js';
import { parseSearchRequest } from '../../fhir/search/parse.js';
import type { Resource } from '../../fhir/types.js';
import { narrowerOf } from '../../fhir/search/reference-pairs.js';
import { resourceTypes } from '../../fhir/search/registry.js';
import * as m025 from './025-narrow-index-rows.js';
import { bareDatabases } from '../../../test/support/db.js';
import { insertOldCompositeRows, insertOldSystems } from '../../../test/support/old-index-rows.js';

const databases = bareDatabases(2);

const PROJECT = 'p025';
const scope = { projectId: PROJECT };

/** Stores resources and their index rows as store.ts did then (resources, then the index; sp_missing came with 028). */
async function store(db: Queryable, resources: Resource[]): Promise<void> {
  for (const resource of resources) {
    const r = await db.query<{ rid: string }>(
      `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, content)
       VALUES ($1, $2, $3, 1, now(), $4::json) RETURNING rid`,
      [resource.resourceType, resource.id, PROJECT, JSON.stringify(resource)],
    );
    await rewriteIndexTables(
      db,
      [{ rid: Number(r.rows[0]?.rid), resource }],
      INDEX_TABLES.filter((t) => t !== 'sp_missing'),
    );
  }
}

const weight = (id: string, subject: string, kg: number): Resource => ({
  resourceType: 'Observation',
  id,
  status: 'final',
  code: { coding: [{ system: 'http://loinc.org', code: '29463-7', display: 'Body Weight' }] },
  subject: { reference: subject },
  valueQuantity: { value: kg, unit: 'kg', system: 'http://unitsofmeasure.org', code: 'kg' },
});

const ids = async (db: Queryable, type: string, query: Record<string, string>): Promise<string[]> => {
  const r = await executeSearch(db, parseSearchRequest(type, query), scope);
  return [...r.matches, ...r.included].map((e) => `${e.resourceType}/${e.id}`).sort();
};

describe.each(databases)('migration 025 on $name', (database) => {
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => cleanup?.());

  it('keeps the answers of rows written before it, and rows written after it are narrower', async () => {
    const { db, drop } = await database.open();
    cleanup = async () => {
      await db.close();
      await drop();
    };
    await migrate(
      db,
      MIGRATIONS.filter((m) => m.version < 25),
    );
    await store(db, [
      { resourceType: 'Patient', id: 'p1', name: [{ family: 'Old' }] },
      { resourceType: 'Patient', id: 'p2', name: [{ family: 'New' }] },
      { resourceType: 'Group', id: 'g1', type: 'person', actual: true },
      weight('o1', 'Patient/p1', 70),
      // Names no resource here: three parts, the first two those of p2.
      weight('o9', 'Patient/p2/extra', 90),
      weight('og', 'Group/g1', 60),
    ]);
    // The writer before migration 025 wrote `subject` rows for the references that `patient` rows repeat.
    await db.query(
      `INSERT INTO sp_reference (rid, resource_type, code, ref)
       SELECT rid, resource_type, 'subject', ref FROM sp_reference WHERE code = 'patient'`,
    );
    // As the writer before migration 025 wrote them: the target's type and id beside `ref` (a Reference.type hint
    // where the text names no resource), and the display text on composite token rows too.
    await db.query(
      `UPDATE sp_reference SET target_type = split_part(ref, '/', 1),
         target_id = CASE WHEN ref LIKE '%/%/%' THEN NULL ELSE split_part(ref, '/', 2) END`,
    );
    // The composite rows that the writer wrote before migration 027 (its own `code-value-quantity` rows).
    const stored = await db.query<{ rid: string; json: string }>(
      `SELECT rid, content::text AS json FROM resources WHERE resource_type = 'Observation'`,
    );
    await insertOldCompositeRows(
      db,
      stored.rows.map((r) => ({ rid: Number(r.rid), resource: JSON.parse(r.json) as Resource })),
    );
    // And code systems as URIs (the writer before migration 027).
    expect(await insertOldSystems(db)).toBeGreaterThan(0);
    const composite = await db.query(
      `UPDATE sp_token SET text_norm = 'body weight' WHERE grp IS NOT NULL AND code LIKE '%$0' RETURNING rid`,
    );
    expect(composite.rows.length).toBeGreaterThan(0);

    const before = await db.query<{ code: string; n: number }>(
      `SELECT code, count(*)::int AS n FROM sp_reference WHERE code IN ('subject', 'patient') GROUP BY code ORDER BY code`,
    );
    expect(before.rows).toEqual([
      { code: 'patient', n: 1 },
      { code: 'subject', n: 3 },
    ]);
    expect(await migrate(db)).toEqual(MIGRATIONS.filter((m) => m.version >= 25).map((m) => m.version));
    // One row per reference: `patient` where the subject is a Patient, `subject` for the Group (and for `o9`'s text,
    // which names no Patient).
    const after = await db.query<{ code: string; ref: string }>(
      `SELECT code, ref FROM sp_reference WHERE code IN ('subject', 'patient') ORDER BY code, ref`,
    );
    expect(after.rows).toEqual([
      { code: 'patient', ref: 'Patient/p1' },
      { code: 'subject', ref: 'Group/g1' },
      { code: 'subject', ref: 'Patient/p2/extra' },
    ]);
    const columns = await db.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns
       WHERE table_name = 'sp_reference' AND table_schema = current_schema() ORDER BY ordinal_position`,
    );
    expect(columns.rows.map((c) => c.column_name)).toEqual(['rid', 'resource_type', 'code', 'ref', 'grp']);
    const index = await db.query<{ def: string }>(
      `SELECT pg_get_indexdef(c.oid) AS def FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE c.relname = 'sp_token_text' AND n.nspname = current_schema()`,
    );
    expect(index.rows[0]?.def).toMatch(/WHERE \(\(text_norm IS NOT NULL\) AND \(grp IS NULL\)\)/);

    // Written after the migration: the composite token rows hold no text.
    await store(db, [weight('o2', 'Patient/p2', 80)]);
    const texts = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM sp_token t JOIN resources r ON r.rid = t.rid
       WHERE r.id = 'o2' AND t.grp IS NOT NULL AND t.text_norm IS NOT NULL`,
    );
    expect(texts.rows[0]?.n).toBe(0);

    const rows = await db.query<{ code: string; ref: string }>(
      `SELECT x.code, x.ref FROM sp_reference x JOIN resources r ON r.rid = x.rid WHERE r.id = 'o2'`,
    );
    expect(rows.rows).toEqual([{ code: 'patient', ref: 'Patient/p2' }]);

    expect(await ids(db, 'Observation', { subject: 'Patient/p1' })).toEqual(['Observation/o1']);
    expect(await ids(db, 'Observation', { patient: 'p1' })).toEqual(['Observation/o1']);
    expect(await ids(db, 'Observation', { subject: 'Group/g1' })).toEqual(['Observation/og']);
    expect(await ids(db, 'Observation', { patient: 'Group/g1' })).toEqual([]);
    expect(await ids(db, 'Observation', { 'subject:missing': 'false' })).toEqual([
      'Observation/o1',
      'Observation/o2',
      'Observation/o9',
      'Observation/og',
    ]);
    expect(await ids(db, 'Observation', { 'patient:missing': 'true' })).toEqual([
      'Observation/o9',
      'Observation/og',
    ]);
    expect(await ids(db, 'Observation', { 'subject:Patient.name': 'old' })).toEqual(['Observation/o1']);
    expect(await ids(db, 'Observation', { subject: 'Patient/p1,Group/g1', _sort: '-subject' })).toEqual([
      'Observation/o1',
      'Observation/og',
    ]);
    const sorted = await executeSearch(
      db,
      parseSearchRequest('Observation', { _sort: 'subject', _id: 'o1,o2,og' }),
      scope,
    );
    expect(sorted.matches.map((m) => m.id)).toEqual(['og', 'o1', 'o2']);
    expect(await ids(db, 'Patient', { _id: 'p1', _revinclude: 'Observation:subject' })).toEqual([
      'Observation/o1',
      'Patient/p1',
    ]);
    expect(await ids(db, 'Group', { _id: 'g1', _revinclude: 'Observation:subject' })).toEqual([
      'Group/g1',
      'Observation/og',
    ]);
    expect(await ids(db, 'Group', { _id: 'g1', _revinclude: 'Observation:patient' })).toEqual(['Group/g1']);
    expect(await ids(db, 'Patient', { _id: 'p1', _revinclude: '*' })).toEqual([
      'Observation/o1',
      'Patient/p1',
    ]);
    expect(await ids(db, 'Patient', { _id: 'p1' })).toEqual(['Patient/p1']);
    expect(await ids(db, 'Group', { '_has:Observation:subject:_id': 'og' })).toEqual(['Group/g1']);
    expect(await ids(db, 'Observation', { subject: 'p2' })).toEqual(['Observation/o2']);
    expect(await ids(db, 'Observation', { 'code:text': 'body' })).toEqual([
      'Observation/o1',
      'Observation/o2',
      'Observation/o9',
      'Observation/og',
    ]);
    expect(await ids(db, 'Observation', { 'code-value-quantity': 'http://loinc.org|29463-7$gt75' })).toEqual([
      'Observation/o2',
      'Observation/o9',
    ]);
    // _include and _has find the targets of old and new rows alike, and never p2 through o9's `Patient/p2/extra`.
    expect(await ids(db, 'Observation', { _id: 'o1,o2,o9', _include: 'Observation:subject' })).toEqual([
      'Observation/o1',
      'Observation/o2',
      'Observation/o9',
      'Patient/p1',
      'Patient/p2',
    ]);
    expect(await ids(db, 'Observation', { _id: 'o9', _include: 'Observation:subject' })).toEqual([
      'Observation/o9',
    ]);
    expect(await ids(db, 'Observation', { _id: 'o1', _include: 'Observation:subject:Group' })).toEqual([
      'Observation/o1',
    ]);
    expect(await ids(db, 'Patient', { '_has:Observation:subject:code': '29463-7' })).toEqual([
      'Patient/p1',
      'Patient/p2',
    ]);
    expect(await ids(db, 'Patient', { '_has:Observation:subject:_id': 'o9' })).toEqual([]);
    expect(await ids(db, 'Patient', { '_has:Observation:subject:_id': 'o1' })).toEqual(['Patient/p1']);
  });
});

describe('migration 025 reference pairs', () => {
  it('deletes the rows of the pairs the index writer keeps once, and of no other', () => {
    const written = [...resourceTypes()]
      .flatMap((t) => [...narrowerOf(t)].map(([wide, narrow]) => `${t} ${wide} ${narrow}`))
      .sort();
    const migrated = [...m025.sql.matchAll(/\('([A-Za-z]+)', '([a-z-]+)', '([a-z-]+)'\)/g)]
      .map((m) => `${m[1]} ${m[2]} ${m[3]}`)
      .sort();
    expect(written).toContain('Observation subject patient');
    expect(migrated).toEqual(written);
  });
});
