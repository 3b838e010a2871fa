// A server killed with SIGKILL after a write committed and before its notification was acknowledged (API.md §8:
// nothing is lost between the commit and the delivery): after a restart on the same data, the event is delivered
// with the number it was given.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { clientToken, exited, freePort, startServer, waitHealthy } from '../support/server-process.js';
import { startReceiver, type Receiver } from '../support/receiver.js';

const CLIENT = 'sub-crash-client';
const SECRET = 'sub-crash-secret-0123456789';

describe('a subscription event interrupted by SIGKILL', () => {
  const dirs: string[] = [];
  let rx: Receiver | undefined;
  afterAll(async () => {
    await rx?.close();
    dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true }));
  });

  it('is delivered after a restart', async () => {
    rx = await startReceiver();
    const receiver = rx;
    // The first notification is held open: the server is killed while it waits for the answer.
    receiver.answer = () => (receiver.received.length === 1 ? 'hang' : 200);
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-sub-crash-'));
    dirs.push(dataDir);
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const configFile = path.join(dataDir, 'cinder.json');
    fs.writeFileSync(
      configFile,
      JSON.stringify({
        admin: { clientId: CLIENT, clientSecret: SECRET },
        allowedOutboundHosts: [receiver.host],
      }),
    );
    const env = {
      CINDER_CONFIG: configFile,
      DATA_DIR: dataDir,
      PORT: String(port),
      BASE_URL: base,
      LOG_LEVEL: 'warn',
      JOB_LEASE_SECONDS: '2',
    };
    const first = startServer(env);
    await waitHealthy(port, first.child);
    const token = await clientToken(port, CLIENT, SECRET);
    const post = (resource: Record<string, unknown>): Promise<Response> =>
      fetch(`${base}/fhir/R4/${resource.resourceType as string}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
        body: JSON.stringify(resource),
      });
    const sub = await post({
      resourceType: 'Subscription',
      status: 'active',
      reason: 'crash',
      criteria: 'Patient',
      channel: { type: 'rest-hook', endpoint: `${receiver.url}/crash`, payload: 'application/fhir+json' },
    });
    expect(sub.status).toBe(201);
    const patient = await post({ resourceType: 'Patient', name: [{ family: 'Crash' }] });
    expect(patient.status).toBe(201);
    const id = ((await patient.json()) as { id: string }).id;
    await receiver.waitFor(1, { timeoutMs: 20_000 });
    first.child.kill('SIGKILL');
    await exited(first.child);

    const second = startServer(env);
    try {
      await waitHealthy(port, second.child);
      const got = await receiver.waitFor(2, { timeoutMs: 30_000 });
      const last = got[got.length - 1];
      expect(last?.headers['x-cinder-event-number']).toBe('1');
      expect((JSON.parse(last?.body ?? '{}') as { id: string }).id).toBe(id);
    } finally {
      second.child.kill('SIGTERM');
      await exited(second.child);
    }
  });
});
