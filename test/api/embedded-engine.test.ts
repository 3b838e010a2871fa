// The embedded default is PostgreSQL from npm packages (issue 16): a dataDir written by the PGlite engine is moved
// into it at the first start, with a log line, and everything in it stays readable, searchable and writable.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  clientToken,
  exited,
  freePort,
  startServer,
  waitHealthy,
  type ServerProcess,
} from '../support/server-process.js';

const admin = { clientId: 'move-admin', clientSecret: 'move-admin-secret-0123456789' };

describe('the embedded database', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

  it('moves a PGlite dataDir into the embedded PostgreSQL once, keeping resources, history and ids', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-move-'));
    dirs.push(dataDir);
    const configFile = path.join(dataDir, 'cinder.json');
    fs.writeFileSync(configFile, JSON.stringify({ admin }));
    const port = await freePort();
    const env = { CINDER_CONFIG: configFile, DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'info' };
    const api = (token: string) => async (method: string, url: string, body?: unknown) => {
      const res = await fetch(`http://127.0.0.1:${port}/fhir/R4/${url}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const stop = async (s: ServerProcess) => {
      s.child.kill('SIGTERM');
      expect(await exited(s.child)).toBe(0);
    };

    const old = startServer({ ...env, EMBEDDED_ENGINE: 'pglite' });
    await waitHealthy(port, old.child);
    let call = api(await clientToken(port, admin.clientId, admin.clientSecret));
    const created = await call('POST', 'Patient', { resourceType: 'Patient', name: [{ family: 'Movable' }] });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const updated = await call('PUT', `Patient/${id}`, {
      resourceType: 'Patient',
      id,
      name: [{ family: 'Movable', given: ['Second'] }],
    });
    expect(updated.status).toBe(200);
    await stop(old);
    expect(fs.existsSync(path.join(dataDir, 'pglite'))).toBe(true);

    const moved = startServer(env);
    await waitHealthy(port, moved.child);
    expect(moved.output()).toMatch(/moved \d+ rows of \d+ tables from PGlite/);
    expect(fs.existsSync(path.join(dataDir, 'pglite'))).toBe(false);
    expect(fs.readdirSync(dataDir).some((f) => f.startsWith('pglite.moved-'))).toBe(true);
    // The same client secret still logs in: the credentials moved too.
    call = api(await clientToken(port, admin.clientId, admin.clientSecret));
    const health = await fetch(`http://127.0.0.1:${port}/healthcheck`);
    expect(((await health.json()) as { database: { kind: string } }).database.kind).toBe('postgres');
    const read = await call('GET', `Patient/${id}`);
    expect(read.status).toBe(200);
    expect(read.body.meta).toMatchObject({ versionId: '2' });
    expect((read.body.name as { given: string[] }[])[0]?.given).toEqual(['Second']);
    const first = await call('GET', `Patient/${id}/_history/1`);
    expect(first.status).toBe(200);
    expect((first.body.name as { given?: string[] }[])[0]?.given).toBeUndefined();
    const found = await call('GET', 'Patient?family=Movable');
    expect(found.body.total).toBe(1);
    // New rows get keys after the moved ones (the serial sequences continue past them).
    for (let i = 0; i < 3; i++) {
      const more = await call('POST', 'Patient', { resourceType: 'Patient', name: [{ family: 'Movable' }] });
      expect(more.status).toBe(201);
    }
    expect((await call('GET', 'Patient?family=Movable')).body.total).toBe(4);
    await stop(moved);

    // The next start finds nothing left to move.
    const again = startServer(env);
    await waitHealthy(port, again.child);
    expect(again.output()).not.toMatch(/from PGlite/);
    call = api(await clientToken(port, admin.clientId, admin.clientSecret));
    expect((await call('GET', 'Patient?family=Movable')).body.total).toBe(4);
    await stop(again);
  }, 300_000);
});
