// Subscriptions under hostile load and input (API.md §8; the guide's hostile tests for a new surface): one write in
// project A that matches hundreds of subscriptions must not stop project B's reads, and every one of A's
// notifications still goes out; Subscription bodies nested too deep, far too large or malformed answer 4xx, never 5xx.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postBundle, postResource, startTestApp, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { startReceiver, type Receiver } from '../support/receiver.js';

const MANY = 200;

describe.each(testDatabases())('subscriptions under hostile load on $name', (database) => {
  let t: TestApp;
  let rx: Receiver;
  let a: { projectId: string; adminToken: string; memberToken: string };
  let b: { projectId: string; adminToken: string; memberToken: string };

  beforeAll(async () => {
    rx = await startReceiver();
    t = await startTestApp(
      database,
      { allowedOutboundHosts: [rx.host], maxSubscriptionsPerProject: MANY + 10 },
      { deliver: { pollMs: 30 } },
    );
    a = await t.newProject();
    b = await t.newProject();
  });
  afterAll(async () => {
    await t?.close();
    await rx?.close();
  });

  const subscription = (i: number): Record<string, unknown> => ({
    resourceType: 'Subscription',
    status: 'requested',
    reason: `load ${i}`,
    criteria: 'Patient?family=Crowd',
    channel: { type: 'rest-hook', endpoint: `${rx.url}/crowd/${i}`, payload: 'application/fhir+json' },
  });

  it("one write matching hundreds of subscriptions neither stalls another project's reads nor loses a notification", async () => {
    // Stored as one transaction: MANY active subscriptions in project A on the same criteria.
    const stored = await postBundle(
      t,
      a.adminToken,
      'transaction',
      Array.from({ length: MANY }, (_, i) => ({
        resource: subscription(i),
        request: { method: 'POST', url: 'Subscription' },
      })),
    );
    expect(stored.statusCode, stored.body.slice(0, 500)).toBe(200);
    const mine = await postResource(t, b.adminToken, { resourceType: 'Patient', name: [{ family: 'Mine' }] });
    expect(mine.statusCode).toBe(201);
    const id = mine.json().id as string;

    // The heavy write and B's reads at once: every read answers B's own patient.
    const heavy = postResource(t, a.adminToken, { resourceType: 'Patient', name: [{ family: 'Crowd' }] });
    const reads = Array.from({ length: 20 }, () =>
      t.request({ method: 'GET', url: `${t.fhir}/Patient/${id}`, token: b.adminToken }),
    );
    const [written, ...answers] = await Promise.all([heavy, ...reads]);
    expect(written?.statusCode).toBe(201);
    for (const r of answers) {
      expect(r.statusCode).toBe(200);
      expect(r.json().id).toBe(id);
    }
    // Every subscription is told, once, about event 1; B's write told nobody.
    const got = await rx.waitFor(MANY, { timeoutMs: 60_000 });
    const crowd = got.filter((r) => r.path.startsWith('/crowd/'));
    expect(new Set(crowd.map((r) => r.path)).size).toBe(MANY);
    expect(crowd.every((r) => r.headers['x-cinder-event-number'] === '1')).toBe(true);
    expect(crowd.some((r) => r.body.includes('"Mine"'))).toBe(false);
  });

  it('answers Subscription bodies nested too deep, too large or malformed with 4xx, and goes on serving', async () => {
    // Written as text: a 5,000-level object is deeper than JSON.stringify (and the test client) can walk.
    const level = '{"url":"http://example.org/x","extension":[';
    const deep = `${level.repeat(5000)}{"url":"http://example.org/x","valueString":"bottom"}${']}'.repeat(5000)}`;
    const base = JSON.stringify(subscription(0));
    const bodies: unknown[] = [
      `${base.slice(0, -1)},"extension":[${deep}]}`,
      { ...subscription(0), reason: 'x'.repeat(2_000_000) },
      { ...subscription(0), channel: { type: 'rest-hook', endpoint: { not: 'a string' } } },
      { ...subscription(0), channel: 'rest-hook' },
      { ...subscription(0), criteria: ['Patient'] },
      { ...subscription(0), channel: { type: 'rest-hook', endpoint: `${rx.url}/x`, header: 'not an array' } },
      { ...subscription(0), channel: { type: 'websocket', header: Array(10_000).fill('X-A: b') } },
    ];
    for (const body of bodies) {
      const res = await t.request({
        method: 'POST',
        url: `${t.fhir}/Subscription`,
        token: a.adminToken,
        ...(typeof body === 'string'
          ? { payload: body, headers: { 'content-type': 'application/fhir+json' } }
          : { payload: body as Record<string, unknown> }),
      });
      expect(res.statusCode, res.body.slice(0, 300)).toBeGreaterThanOrEqual(400);
      expect(res.statusCode, res.body.slice(0, 300)).toBeLessThan(500);
      expect(res.json().resourceType).toBe('OperationOutcome');
    }
    const alive = await t.request({
      method: 'GET',
      url: `${t.fhir}/Subscription?_count=1`,
      token: a.adminToken,
    });
    expect(alive.statusCode).toBe(200);
  });
});
