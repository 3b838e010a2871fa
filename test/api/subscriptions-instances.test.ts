// Two Cinder instances on one PostgreSQL (API.md §8 "Delivery ... from whichever instance"): writes made on both, one
// subscription, every event delivered, each event number naming one version and no version under two numbers.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresSignals, type Signals } from '../../src/storage/signals.js';
import { postResource, startTestApp, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { startReceiver, type Receiver } from '../support/receiver.js';

const url = process.env.TEST_DATABASE_URL;
const postgres = testDatabases().find((d) => d.name === 'postgres');
const EVENTS = 60;

describe.runIf(url && postgres)('subscriptions across two instances on PostgreSQL', () => {
  let a: TestApp;
  let b: TestApp;
  let rx: Receiver;
  const signals: Signals[] = [];

  beforeAll(async () => {
    rx = await startReceiver();
    const channel = `subs_${randomBytes(4).toString('hex')}`;
    const sig = (): Signals => {
      const s = postgresSignals(url as string, { schema: channel });
      signals.push(s);
      return s;
    };
    const database = postgres as NonNullable<typeof postgres>;
    const deliver = { pollMs: 50, concurrency: 4 };
    a = await startTestApp(database, { allowedOutboundHosts: [rx.host] }, { signals: sig(), deliver });
    b = await startTestApp(
      database,
      { allowedOutboundHosts: [rx.host] },
      { db: a.db, signals: sig(), deliver },
    );
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    for (const s of signals) await s.close();
    await rx?.close();
  });

  it('delivers every event once per number, whichever instance wrote or delivers', async () => {
    const { adminToken } = await a.newProject();
    const sub = await postResource(a, adminToken, {
      resourceType: 'Subscription',
      status: 'active',
      reason: 'two instances',
      criteria: 'Patient',
      channel: { type: 'rest-hook', endpoint: `${rx.url}/both`, payload: 'application/fhir+json' },
    });
    expect(sub.statusCode).toBe(201);
    // Instance B learns of the new subscription through the signal; give it a moment.
    await new Promise((r) => setTimeout(r, 300));
    const writes = await Promise.all(
      Array.from({ length: EVENTS }, (_, i) =>
        postResource(i % 2 ? a : b, adminToken, { resourceType: 'Patient', name: [{ family: `Both${i}` }] }),
      ),
    );
    expect(writes.every((w) => w.statusCode === 201)).toBe(true);
    const got = await rx.waitFor(EVENTS, { path: '/both', timeoutMs: 20_000 });
    await new Promise((r) => setTimeout(r, 300));
    const byNumber = new Map<string, string>();
    for (const r of rx.received.filter((x) => x.path === '/both')) {
      const n = r.headers['x-cinder-event-number'] as string;
      const id = (JSON.parse(r.body) as { id: string }).id;
      // At least once: a repeat must name the same version under the same number.
      if (byNumber.has(n)) expect(byNumber.get(n)).toBe(id);
      byNumber.set(n, id);
    }
    expect([...byNumber.keys()].map(Number).sort((x, y) => x - y)).toEqual(
      Array.from({ length: EVENTS }, (_, i) => i + 1),
    );
    expect(new Set(byNumber.values())).toEqual(new Set(writes.map((w) => w.json().id as string)));
    expect(got.length).toBeGreaterThanOrEqual(EVENTS);
  });
});
