// The index backfill in the server process (src/main.ts): a data directory whose full-text and `$lastn` tables are
// missing its older resources, as after an upgrade, is filled in the background once the server is up, with the
// progress in its log, and `_content` and `$lastn` then find those resources. (Both engines: index-backfill.test.ts.)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/storage/migrate.js';
import { openPglite } from '../../src/storage/pglite.js';
import {
  clientToken,
  exited,
  freePort,
  startServer,
  waitHealthy,
  type ServerProcess,
} from '../support/server-process.js';

describe('the index backfill in the server process', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-backfill-'));
  let server: ServerProcess | undefined;
  afterAll(async () => {
    if (server && server.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await exited(server.child);
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(`${dataDir}.json`, { force: true });
  });

  it('fills the new tables after an upgrade, logging start and end with counts', async () => {
    const port = await freePort();
    const configFile = path.join(dataDir, '..', `${path.basename(dataDir)}.json`);
    fs.writeFileSync(
      configFile,
      JSON.stringify({ admin: { clientId: 'backfill-admin', clientSecret: 'backfill-secret-0123456789' } }),
    );
    const env = {
      CINDER_CONFIG: configFile,
      DATA_DIR: dataDir,
      PORT: String(port),
      EMBEDDED_ENGINE: 'pglite',
      LOG_LEVEL: 'info',
    };
    server = startServer(env);
    await waitHealthy(port, server.child);
    const token = await clientToken(port, 'backfill-admin', 'backfill-secret-0123456789');
    const fhir = `http://127.0.0.1:${port}/fhir/R4`;
    const post = async (resource: Record<string, unknown>): Promise<string> => {
      const res = await fetch(`${fhir}/${resource.resourceType as string}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
        body: JSON.stringify(resource),
      });
      expect(res.status).toBe(201);
      return ((await res.json()) as { id: string }).id;
    };
    const search = async (query: string): Promise<string[]> => {
      const res = await fetch(`${fhir}/${query}`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      const b = (await res.json()) as { entry?: { resource: { id: string } }[] };
      return (b.entry ?? []).map((e) => e.resource.id);
    };
    const pat = await post({ resourceType: 'Patient', name: [{ family: 'Axolotl' }] });
    const obs = await post({
      resourceType: 'Observation',
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
      subject: { reference: `Patient/${pat}` },
      effectiveDateTime: '2024-01-01',
    });
    server.child.kill('SIGTERM');
    expect(await exited(server.child)).toBe(0);

    // As written by a version before the full-text and `$lastn` tables: their rows missing; then upgraded.
    const db = await openPglite(dataDir);
    try {
      await db.query('DELETE FROM sp_text');
      await db.query('DELETE FROM sp_lastn');
      await db.query('DROP TABLE index_backfills');
      await db.query('DELETE FROM schema_migrations WHERE version = 23');
      expect(await migrate(db)).toEqual([23]);
    } finally {
      await db.close();
    }

    server = startServer(env);
    await waitHealthy(port, server.child);
    const deadline = Date.now() + 60_000;
    while (!/index backfill of sp_text: done, \d+ resources/.test(server.output()) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    const out = server.output();
    expect(out).toMatch(/index backfill of sp_text: starting/);
    expect(out).toMatch(/index backfill of sp_lastn: done, 1 resources/);
    expect(out).toMatch(/index backfill of sp_text: done, \d+ resources/);
    expect(await search('Patient?_content=axolotl')).toEqual([pat]);
    expect(await search(`Observation/$lastn?patient=${pat}&code=http://loinc.org|8867-4`)).toEqual([obs]);
    server.child.kill('SIGTERM');
    expect(await exited(server.child)).toBe(0);
  });
});
