// Nothing of the audit trail is lost (API.md §10): a write's AuditEvent commits with the write, so a server killed
// with SIGKILL right after answering still has it after a restart; reads' AuditEvents, buffered for up to a second,
// are stored when the server is stopped gracefully (SIGTERM). Real server processes on the embedded database.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { clientToken, exited, freePort, startServer, waitHealthy } from '../support/server-process.js';

const CLIENT = 'audit-crash-client';
const SECRET = 'audit-crash-secret-0123456789';
const WRITES = 25;
const READS = 25;

describe('the audit trail across SIGKILL and SIGTERM', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

  it("keeps every write's AuditEvent through SIGKILL and every read's through SIGTERM", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-audit-crash-'));
    dirs.push(dataDir);
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const configFile = path.join(dataDir, 'cinder.json');
    fs.writeFileSync(configFile, JSON.stringify({ admin: { clientId: CLIENT, clientSecret: SECRET } }));
    const env = {
      CINDER_CONFIG: configFile,
      DATA_DIR: dataDir,
      PORT: String(port),
      BASE_URL: base,
      LOG_LEVEL: 'warn',
    };
    const call = (token: string, method: string, url: string, body?: unknown): Promise<Response> =>
      fetch(`${base}/fhir/R4/${url}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });

    // 1. Writes, then SIGKILL the moment the last one is answered.
    const first = startServer(env);
    const ids: string[] = [];
    try {
      await waitHealthy(port, first.child);
      const token = await clientToken(port, CLIENT, SECRET);
      const answers = await Promise.all(
        Array.from({ length: WRITES }, (_, i) =>
          call(token, 'POST', 'Patient', { resourceType: 'Patient', name: [{ family: `Killed${i}` }] }),
        ),
      );
      for (const r of answers) {
        expect(r.status).toBe(201);
        ids.push(((await r.json()) as { id: string }).id);
      }
    } finally {
      first.child.kill('SIGKILL');
      await exited(first.child);
    }

    // 2. Reads, then SIGTERM right after the last answer.
    const second = startServer(env);
    try {
      await waitHealthy(port, second.child);
      const token = await clientToken(port, CLIENT, SECRET);
      for (let i = 0; i < READS; i++) {
        const r = await call(token, 'GET', `Patient/${ids[i % ids.length] as string}?read=${i}`);
        expect(r.status).toBe(200);
      }
    } finally {
      second.child.kill('SIGTERM');
      expect(await exited(second.child)).toBe(0);
    }

    // 3. Everything is there.
    const third = startServer(env);
    try {
      await waitHealthy(port, third.child);
      const token = await clientToken(port, CLIENT, SECRET);
      for (const id of ids) {
        const r = await call(token, 'GET', `AuditEvent?entity=Patient/${id}&subtype=create`);
        const bundle = (await r.json()) as { entry?: unknown[] };
        expect(bundle.entry ?? [], `create of Patient/${id}`).toHaveLength(1);
      }
      const reads = await call(token, 'GET', `AuditEvent?subtype=read&_count=1000`);
      const entries =
        ((await reads.json()) as { entry?: { resource: { entity?: unknown[] } }[] }).entry ?? [];
      const readOfPatients = entries.filter((e) => JSON.stringify(e.resource.entity).includes('"Patient/'));
      expect(readOfPatients.length).toBeGreaterThanOrEqual(READS);
    } finally {
      third.child.kill('SIGTERM');
      await exited(third.child);
    }
  });
});
