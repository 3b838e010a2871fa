// Migration 018 on a database written by earlier versions: AuditEvents that clients stored as resources move to the
// audit table with their search columns, exactly as written, and leave the resource and index tables.
import { afterEach, describe, expect, it } from 'vitest';
import { migrate, MIGRATIONS } from '../migrate.js';
import { openPglite } from '../pglite.js';

describe('migration 018', () => {
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => cleanup?.());

  it('moves stored AuditEvent resources into the audit table', async () => {
    const db = await openPglite(null);
    cleanup = () => db.close();
    await migrate(
      db,
      MIGRATIONS.filter((m) => m.version < 18),
    );
    const content =
      '{"resourceType":"AuditEvent","id":"a1","type":{"system":"http://x","code":"print"},' +
      '"subtype":[{"system":"http://y","code":"s"}],"action":"R","recorded":"2025-01-02T03:04:05.000Z","outcome":"0",' +
      '"agent":[{"who":{"reference":"Practitioner/p1"},"requestor":true}],' +
      '"entity":[{"what":{"reference":"Patient/pat1"}},{"what":{"reference":"Observation/o1"}}],"value":1.50}';
    const rid = (
      await db.query<{ rid: string }>(
        `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, content)
         VALUES ('AuditEvent', 'a1', 'proj', 1, now(), $1::json) RETURNING rid`,
        [content],
      )
    ).rows[0]?.rid;
    await db.query(
      `INSERT INTO resource_history (rid, resource_type, id, version_id, project_id, last_updated, deleted, content)
       SELECT rid, resource_type, id, 1, project_id, last_updated, false, content FROM resources`,
    );
    await db.query(
      `INSERT INTO sp_token (rid, resource_type, code, system, value) VALUES ($1, 'AuditEvent', 'action', NULL, 'R')`,
      [rid],
    );
    await migrate(db);
    const row = (
      await db.query<Record<string, unknown>>(
        'SELECT id, project_id, type, subtype, action, outcome, agents, entities, patients, content, recorded FROM audit_events',
      )
    ).rows;
    expect(row).toHaveLength(1);
    expect(row[0]).toMatchObject({
      id: 'a1',
      project_id: 'proj',
      type: 'http://x|print',
      subtype: ['http://y|s'],
      action: 'R',
      outcome: '0',
      agents: ['Practitioner/p1'],
      entities: ['Patient/pat1', 'Observation/o1'],
      patients: ['Patient/pat1'],
      content,
    });
    expect(new Date(row[0]?.recorded as string).toISOString()).toBe('2025-01-02T03:04:05.000Z');
    // Moved unsealed: on the sealer's list, not yet linked.
    const listed = await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM audit_unsealed u JOIN audit_events a ON a.seq = u.seq',
    );
    expect(listed.rows[0]?.n).toBe(1);
    const linked = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_chain');
    expect(linked.rows[0]?.n).toBe(0);
    for (const table of ['resources', 'resource_history', 'sp_token']) {
      const n = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${table} WHERE resource_type = 'AuditEvent'`,
      );
      expect(n.rows[0]?.n, table).toBe(0);
    }
  });
});
