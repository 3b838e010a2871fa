// The embedded default is PostgreSQL from npm packages (issue 16): a dataDir written by the PGlite engine is moved
// into it at the first start, with a log line, and everything in it stays readable, searchable and writable. A
// PostgreSQL killed while Cinder runs is started again, and requests are answered again.
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

  it('answers again after its PostgreSQL was killed with SIGKILL: the server is restarted, committed work kept', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-pgkill-'));
    dirs.push(dataDir);
    const configFile = path.join(dataDir, 'cinder.json');
    fs.writeFileSync(configFile, JSON.stringify({ admin }));
    const port = await freePort();
    const server = startServer({
      CINDER_CONFIG: configFile,
      DATA_DIR: dataDir,
      PORT: String(port),
      LOG_LEVEL: 'info',
    });
    const postmaster = (): number =>
      Number(fs.readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
    const alive = (pid: number): boolean => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    try {
      await waitHealthy(port, server.child);
      const token = await clientToken(port, admin.clientId, admin.clientSecret);
      const call = async (method: string, url: string, body?: unknown) => {
        const res = await fetch(`http://127.0.0.1:${port}/fhir/R4/${url}`, {
          method,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
          ...(body ? { body: JSON.stringify(body) } : {}),
        });
        return { status: res.status, body: (await res.json()) as Record<string, unknown> };
      };
      const created = await call('POST', 'Patient', {
        resourceType: 'Patient',
        name: [{ family: 'Survivor' }],
      });
      expect(created.status).toBe(201);
      const id = created.body.id as string;

      const killed = postmaster();
      process.kill(killed, 'SIGKILL');
      // Until the restarted server answers (a backend of the killed one may still answer a moment), then reads.
      const deadline = Date.now() + 60_000;
      let read = { status: 0, body: {} as Record<string, unknown> };
      while (!server.output().includes('"msg":"embedded PostgreSQL restarted"') || read.status !== 200) {
        if (Date.now() > deadline)
          throw new Error(
            `no answer after the restart (last status ${read.status}); the server's last lines:\n${server.output().slice(-4000)}`,
          );
        await new Promise((r) => setTimeout(r, 200));
        read = await call('GET', `Patient/${id}`).catch(() => read);
      }
      expect(server.child.exitCode).toBeNull();
      expect(server.output()).toMatch(/"signal":"SIGKILL".*"msg":"embedded PostgreSQL exited; restarting"/);
      expect((read.body.name as { family: string }[])[0]?.family).toBe('Survivor');
      const restarted = postmaster();
      expect(restarted).not.toBe(killed);
      expect(
        (await call('POST', 'Patient', { resourceType: 'Patient', name: [{ family: 'Survivor' }] })).status,
      ).toBe(201);
      expect((await call('GET', 'Patient?family=Survivor')).body.total).toBe(2);

      server.child.kill('SIGTERM');
      expect(await exited(server.child)).toBe(0);
      expect(alive(restarted)).toBe(false);
    } finally {
      if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
    }
  }, 300_000);
});
