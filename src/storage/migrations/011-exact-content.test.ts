// Migration 011 on a database written by earlier versions: jsonb content becomes json with the same values, the
// expression indexes of migration 003 still answer, and new writes keep exponents that jsonb rewrote.
import { afterEach, describe, expect, it } from 'vitest';
import { migrate, MIGRATIONS } from '../migrate.js';
import { bareDatabases } from '../../../test/support/db.js';

const databases = bareDatabases(2);

describe.each(databases)('migration 011 on $name', (database) => {
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => cleanup?.());

  it('turns jsonb content into json, keeping values and the content indexes', async () => {
    const { db, drop } = await database.open();
    cleanup = async () => {
      await db.close();
      await drop();
    };
    await migrate(
      db,
      MIGRATIONS.filter((m) => m.version < 11),
    );
    const old =
      '{"resourceType":"ProjectMembership","externalId":"ext-1","value":1.50,"big":12345678901234567890.12}';
    await db.query(
      `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, content)
       VALUES ('ProjectMembership', 'm1', 'p', 1, now(), $1::jsonb)`,
      [old],
    );
    await db.query(
      `INSERT INTO resource_history (rid, resource_type, id, version_id, project_id, last_updated, deleted, content)
       SELECT rid, resource_type, id, 1, project_id, last_updated, false, content FROM resources`,
    );
    // Up to 023: migration 024 deletes the history's copy of each current version.
    const upTo23 = MIGRATIONS.filter((m) => m.version < 24);
    expect(await migrate(db, upTo23)).toEqual(upTo23.filter((m) => m.version >= 11).map((m) => m.version));
    const types = await db.query<{ table_name: string; data_type: string }>(
      `SELECT table_name, data_type FROM information_schema.columns
       WHERE column_name = 'content' AND table_schema = current_schema() AND table_name LIKE 'resource%'
       ORDER BY table_name`,
    );
    expect(types.rows).toEqual([
      { table_name: 'resource_history', data_type: 'json' },
      { table_name: 'resources', data_type: 'json' },
    ]);
    for (const table of ['resources', 'resource_history']) {
      const r = await db.query<{ json: string }>(`SELECT content::text AS json FROM ${table}`);
      expect(JSON.parse(r.rows[0]?.json as string)).toEqual(JSON.parse(old));
      expect(r.rows[0]?.json).toContain('1.50');
      expect(r.rows[0]?.json).toContain('12345678901234567890.12');
    }
    const byExternalId = await db.query<{ id: string }>(
      `SELECT id FROM resources WHERE resource_type = 'ProjectMembership' AND NOT deleted AND content->>'externalId' = $1`,
      ['ext-1'],
    );
    expect(byExternalId.rows).toEqual([{ id: 'm1' }]);
    // The unique expression index still guards externalId.
    await expect(
      db.query(
        `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, content)
         VALUES ('ProjectMembership', 'm2', 'p', 1, now(), $1::json)`,
        [old],
      ),
    ).rejects.toThrow();
    await db.query(
      `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, content)
       VALUES ('Basic', 'b1', 'p', 1, now(), $1::json)`,
      ['{"resourceType":"Basic","v":1.0e2}'],
    );
    const kept = await db.query<{ json: string }>(
      `SELECT content::text AS json FROM resources WHERE id = 'b1'`,
    );
    expect(kept.rows[0]?.json).toBe('{"resourceType":"Basic","v":1.0e2}');
  });
});
