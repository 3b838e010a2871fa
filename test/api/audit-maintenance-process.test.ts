// The server process's audit housekeeping (src/main.ts, src/audit/retention.ts): rows stored while it runs are sealed
// within seconds, `auditRetention` trims old ones, AuditEvent/$verify-chain answers over HTTP, and SIGTERM still
// exits 0. PostgreSQL (TEST_DATABASE_URL), whose tables the test reads and writes while the server runs.
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/storage/db.js';
import { openPostgres } from '../../src/storage/postgres.js';
import { insertEvent, insertMany } from '../support/audit-rows.js';
import {
  clientToken,
  exited,
  freePort,
  startServer,
  waitHealthy,
  type ServerProcess,
} from '../support/server-process.js';

const PG_URL = process.env.TEST_DATABASE_URL;
const CLIENT_ID = 'audit-process-client';
const CLIENT_SECRET = 'audit-process-secret-0123456789';

describe.skipIf(!PG_URL)('audit sealing and retention in the server process (PostgreSQL)', () => {
  const url = PG_URL as string;
  const schema = `t_audit_${randomBytes(5).toString('hex')}`;
  let direct: Db | undefined;
  let server: ServerProcess | undefined;
  let dataDir = '';

  beforeAll(async () => {
    const admin = await openPostgres(url, { max: 1 });
    await admin.exec(`CREATE SCHEMA ${schema}`);
    await admin.close();
    direct = await openPostgres(url, { schema, max: 2 });
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-audit-'));
  });
  afterAll(async () => {
    if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
    await direct?.close();
    const admin = await openPostgres(url, { max: 1 });
    await admin.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const until = async (what: string, test: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    while (!(await test())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}\n${server?.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  it('seals within seconds, trims what auditRetention says, verifies over HTTP, and stops cleanly', async () => {
    const configFile = path.join(dataDir, 'cinder.json');
    fs.writeFileSync(
      configFile,
      JSON.stringify({
        admin: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET },
        logLevel: 'warn',
        auditRetention: 60,
      }),
    );
    const u = new URL(url);
    u.searchParams.set('options', `-c search_path=${schema}`);
    const port = await freePort();
    server = startServer({
      CINDER_CONFIG: configFile,
      DATA_DIR: dataDir,
      PORT: String(port),
      DATABASE_URL: u.toString(),
    });
    await waitHealthy(port, server.child);
    const db = direct as Db;
    const project = randomUUID();
    const old = await insertMany(db, project, 3, new Date(Date.now() - 2 * 3600_000));
    const recent = await insertMany(db, project, 2);
    await insertEvent(db, '');
    const ids = async (): Promise<string[]> =>
      (
        await db.query<{ id: string }>(
          `SELECT a.id FROM audit_chain c JOIN audit_events a ON a.seq = c.seq
           WHERE c.project_id = $1 ORDER BY c.chain_no`,
          [project],
        )
      ).rows.map((r) => r.id);
    await until('every row is sealed', async () => {
      const r = await db.query('SELECT 1 FROM audit_unsealed');
      return r.rows.length === 0;
    });
    // With a retention of a minute, the sweep runs every 6 s: the old rows go, the recent ones stay.
    await until('the old rows are deleted', async () => (await ids()).length === 2);
    expect(await ids()).toEqual(recent);
    expect(old.length).toBe(3);

    const token = await clientToken(port, CLIENT_ID, CLIENT_SECRET);
    const res = await fetch(`http://127.0.0.1:${port}/fhir/R4/AuditEvent/$verify-chain?project=${project}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { parameter: { name: string; valueBoolean?: boolean }[] };
    expect(body.parameter.find((p) => p.name === 'valid')?.valueBoolean).toBe(true);

    server.child.kill('SIGTERM');
    expect(await exited(server.child)).toBe(0);
  });
});
