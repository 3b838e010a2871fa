// A server killed with SIGKILL in the middle of an export (API.md §5, "jobs survive a restart"): after a restart on
// the same data directory the job is resumed from its last checkpoint once its lease has expired, and its file holds
// every resource exactly once (the partial page written after the checkpoint is cut off).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { clientToken, exited, freePort, startServer, waitHealthy } from '../support/server-process.js';

const CLIENT = 'crash-client';
const SECRET = 'crash-secret-0123456789';
const PATIENTS = 150;

describe('an export interrupted by SIGKILL', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

  it('is resumed after a restart and completes with every resource once', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-crash-'));
    dirs.push(dataDir);
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const configFile = path.join(dataDir, 'cinder.json');
    fs.writeFileSync(configFile, JSON.stringify({ admin: { clientId: CLIENT, clientSecret: SECRET } }));
    // Small pages (ten per chunk) and a pause after each chunk keep the export running long enough to be killed mid-way.
    const env = {
      CINDER_CONFIG: configFile,
      DATA_DIR: dataDir,
      PORT: String(port),
      BASE_URL: base,
      LOG_LEVEL: 'warn',
      JOB_LEASE_SECONDS: '2',
      JOB_PAUSE_MS: '100',
      EXPORT_PAGE_SIZE: '2',
    };
    const first = startServer(env);
    await waitHealthy(port, first.child);
    let token = await clientToken(port, CLIENT, SECRET);
    const auth = (): Record<string, string> => ({ authorization: `Bearer ${token}` });

    const bundle = {
      resourceType: 'Bundle',
      type: 'batch',
      entry: Array.from({ length: PATIENTS }, (_, i) => ({
        request: { method: 'POST', url: 'Patient' },
        resource: { resourceType: 'Patient', name: [{ family: `Crash${i}` }] },
      })),
    };
    const posted = await fetch(`${base}/fhir/R4`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/fhir+json' },
      body: JSON.stringify(bundle),
    });
    expect(posted.status).toBe(200);
    const created = new Set(
      ((await posted.json()) as { entry: { response: { location: string } }[] }).entry.map(
        (e) => /^Patient\/([^/]+)/.exec(e.response.location)?.[1],
      ),
    );
    expect(created.size).toBe(PATIENTS);

    const kickoff = await fetch(`${base}/fhir/R4/$export?_type=Patient`, {
      headers: { ...auth(), prefer: 'respond-async' },
    });
    expect(kickoff.status).toBe(202);
    const statusUrl = kickoff.headers.get('content-location') as string;

    // Kill the server once the export has written part of its file.
    let progress = '';
    for (let i = 0; i < 400 && !/Exported [1-9]/.test(progress); i++) {
      const res = await fetch(statusUrl, { headers: auth() });
      expect(res.status).toBe(202);
      progress = res.headers.get('x-progress') ?? '';
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(progress).toMatch(/Exported [1-9]\d* resources/);
    first.child.kill('SIGKILL');
    await exited(first.child);
    expect(Number(/Exported (\d+)/.exec(progress)?.[1])).toBeLessThan(PATIENTS);

    const second = startServer(env);
    try {
      await waitHealthy(port, second.child);
      token = await clientToken(port, CLIENT, SECRET);
      let job: { status: string; output?: { parameter: { part: { name: string; valueUri?: string }[] }[] } };
      for (let i = 0; ; i++) {
        const res = await fetch(statusUrl, { headers: auth() });
        job = (await res.json()) as typeof job;
        if (res.status === 200) break;
        expect(res.status).toBe(202);
        if (i > 600) throw new Error('the job was not resumed');
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(job.status).toBe('completed');
      const url = job.output?.parameter[0]?.part.find((p) => p.name === 'url')?.valueUri as string;
      const file = await fetch(url, { headers: auth() });
      expect(file.status).toBe(200);
      const ids = (await file.text())
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as { id: string }).id);
      expect(ids).toHaveLength(PATIENTS);
      expect(new Set(ids)).toEqual(created);
    } finally {
      second.child.kill('SIGTERM');
      await exited(second.child);
    }
  });
});
