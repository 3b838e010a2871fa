// Websocket delivery end to end (API.md §8 "Websocket"): a real `ws` client binds with the token of
// $get-ws-binding-token and receives the handshake, then one notification Bundle per matching write, from the
// delivery engine itself; on PostgreSQL, a write committed on instance A reaches a socket held by instance B.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { postgresSignals, type Signals } from '../../src/storage/signals.js';
import { postResource, startTestApp, type TestApp } from '../support/app.js';
import { testDatabases, type TestDatabase } from '../support/db.js';
import { freePort } from '../support/listen.js';

interface Param {
  name: string;
  valueCode?: string;
  valueString?: string;
  valueUrl?: string;
  valueUri?: string;
  part?: Param[];
}
interface Bundle {
  type: string;
  entry: { resource?: { resourceType: string; id?: string; parameter?: Param[] } }[];
}

interface Client {
  ws: WebSocket;
  next(ms?: number): Promise<Bundle>;
  /** Resolves with the close code once the server closes the socket. */
  closed: Promise<number>;
}

/** A websocket whose text messages are queued and taken one by one. */
async function socket(url: string): Promise<Client> {
  const ws = new WebSocket(url);
  const queue: string[] = [];
  const waiters: ((t: string) => void)[] = [];
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  ws.on('message', (d) => {
    const text = (d as Buffer).toString('utf8');
    const w = waiters.shift();
    if (w) w(text);
    else queue.push(text);
  });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  return {
    ws,
    closed,
    next(ms = 8000) {
      const q = queue.shift();
      if (q !== undefined) return Promise.resolve(JSON.parse(q) as Bundle);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no message')), ms);
        waiters.push((t) => {
          clearTimeout(timer);
          resolve(JSON.parse(t) as Bundle);
        });
      });
    },
  };
}

const typeOf = (b: Bundle): string | undefined =>
  b.entry[0]?.resource?.parameter?.find((p) => p.name === 'type')?.valueCode;

/** An app listening on a free port; several instances behind one public URL share `baseUrl`. */
async function listen(
  database: TestDatabase,
  extras: Parameters<typeof startTestApp>[2],
  port?: number,
  baseUrl?: string,
): Promise<TestApp & { port: number }> {
  port ??= await freePort();
  const t = await startTestApp(database, { baseUrl: baseUrl ?? `http://127.0.0.1:${port}/` }, extras);
  await t.app.listen({ port, host: '127.0.0.1' });
  return Object.assign(t, { port });
}

async function bindingToken(t: TestApp, token: string, id: string): Promise<{ token: string; url: string }> {
  const res = await t.request({
    method: 'GET',
    url: `${t.fhir}/Subscription/${id}/$get-ws-binding-token`,
    token,
  });
  expect(res.statusCode, res.body).toBe(200);
  const ps = (res.json() as { parameter: Param[] }).parameter;
  return {
    token: ps.find((p) => p.name === 'token')?.valueString as string,
    url: (ps.find((p) => p.name === 'websocket-url')?.valueUrl ??
      ps.find((p) => p.name === 'websocket-url')?.valueUri) as string,
  };
}

const websocketSubscription = (criteria = 'Patient'): Record<string, unknown> => ({
  resourceType: 'Subscription',
  status: 'requested',
  reason: 'sockets',
  criteria,
  channel: { type: 'websocket', payload: 'application/fhir+json' },
});

const B = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';
const TOPIC = 'http://example.org/topics/patient-changed';

describe.each(testDatabases())('websocket delivery on $name', (database) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await listen(database, { deliver: { pollMs: 30 }, socketLimits: { liveCheckMs: 300 } });
  });

  /** A bound client of a new websocket subscription (its Subscription resource too). */
  async function bound(
    token: string,
    body: Record<string, unknown>,
  ): Promise<{ client: Client; sub: Record<string, unknown> }> {
    const res = await postResource(t, token, body);
    expect(res.statusCode, res.body).toBe(201);
    const sub = res.json() as Record<string, unknown>;
    const bind = await bindingToken(t, token, sub.id as string);
    const client = await socket(bind.url);
    client.ws.send(`bind-with-token: ${bind.token}`);
    expect(typeOf(await client.next())).toBe('handshake');
    return { client, sub };
  }
  afterAll(async () => t?.close());

  it('binds, receives the handshake, then each matching version as a notification Bundle', async () => {
    const { adminToken } = await t.newProject();
    const sub = await postResource(t, adminToken, websocketSubscription('Patient?family=Socket'));
    expect(sub.statusCode, sub.body).toBe(201);
    expect(sub.json().status).toBe('active');
    const bind = await bindingToken(t, adminToken, sub.json().id as string);
    const client = await socket(bind.url);
    client.ws.send(`bind-with-token: ${bind.token}`);
    expect(typeOf(await client.next())).toBe('handshake');
    await postResource(t, adminToken, { resourceType: 'Patient', name: [{ family: 'Other' }] });
    const made = await postResource(t, adminToken, { resourceType: 'Patient', name: [{ family: 'Socket' }] });
    const note = await client.next();
    expect(typeOf(note)).toBe('event-notification');
    expect(note.entry[1]?.resource?.id).toBe(made.json().id);
    client.ws.close();
  });

  it('sends a topic subscription its heartbeats, and a test notification as a heartbeat', async () => {
    const { adminToken } = await t.newProject();
    const topic = await postResource(t, adminToken, {
      resourceType: 'SubscriptionTopic',
      url: TOPIC,
      status: 'active',
      resourceTrigger: [{ resource: 'Patient', supportedInteraction: ['create', 'update'] }],
    });
    expect(topic.statusCode, topic.body).toBe(201);
    const { client, sub } = await bound(adminToken, {
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'heartbeats over a socket',
      criteria: TOPIC,
      channel: {
        type: 'websocket',
        payload: 'application/fhir+json',
        extension: [{ url: `${B}/backport-heartbeat-period`, valueUnsignedInt: 1 }],
      },
    });
    expect(sub.status).toBe('active');
    // Nothing happens: a heartbeat arrives within a few periods.
    const beat = await client.next(6000);
    expect(typeOf(beat)).toBe('heartbeat');
    expect(beat.entry).toHaveLength(1);
    const test = await t.request({
      method: 'POST',
      url: `${t.fhir}/Subscription/${sub.id as string}/$test-notification`,
      token: adminToken,
    });
    expect(test.statusCode, test.body).toBe(202);
    expect(typeOf(await client.next(6000))).toBe('heartbeat');
    client.ws.close();
  });

  it('unbinds the sockets of a subscription turned off, and of one deleted', async () => {
    const { adminToken } = await t.newProject();
    const off = await bound(adminToken, websocketSubscription('Patient?family=Off'));
    const gone = await bound(adminToken, websocketSubscription('Patient?family=Gone'));
    const put = await t.request({
      method: 'PUT',
      url: `${t.fhir}/Subscription/${off.sub.id as string}`,
      token: adminToken,
      payload: { ...off.sub, status: 'off' },
    });
    expect(put.statusCode, put.body).toBe(200);
    const told = (await off.client.next()) as unknown as { resourceType: string; issue: { code: string }[] };
    expect(told.resourceType).toBe('OperationOutcome');
    expect(told.issue[0]?.code).toBe('informational');
    expect(await off.client.closed).toBe(1000);
    const del = await t.request({
      method: 'DELETE',
      url: `${t.fhir}/Subscription/${gone.sub.id as string}`,
      token: adminToken,
    });
    expect(del.statusCode, del.body).toBe(200);
    expect(await gone.client.closed).toBe(1000);
    // A matching write afterwards reaches neither (their sockets are closed) and the server goes on answering.
    const later = await postResource(t, adminToken, { resourceType: 'Patient', name: [{ family: 'Off' }] });
    expect(later.statusCode).toBe(201);
    expect(t.subscriptions.hub.boundCount(off.sub.id as string)).toBe(0);
  });
});

const url = process.env.TEST_DATABASE_URL;
const postgres = testDatabases().find((d) => d.name === 'postgres');

describe.runIf(url && postgres)('websocket delivery across two instances on PostgreSQL', () => {
  let a: TestApp & { port: number };
  let b: TestApp & { port: number };
  const signals: Signals[] = [];
  beforeAll(async () => {
    const channel = `wsd_${randomBytes(4).toString('hex')}`;
    const sig = (): Signals => {
      const s = postgresSignals(url as string, { schema: channel });
      signals.push(s);
      return s;
    };
    const database = postgres as TestDatabase;
    a = await listen(database, { signals: sig(), deliver: { pollMs: 30 } });
    // Both behind one public URL (a load balancer's); the test reaches each on its own port.
    b = await listen(
      database,
      { db: a.db, signals: sig(), deliver: { pollMs: 30 } },
      undefined,
      a.config.baseUrl,
    );
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    for (const s of signals) await s.close();
  });

  it('tells a socket held by B about a write committed on A', async () => {
    const { adminToken } = await a.newProject();
    const sub = await postResource(a, adminToken, websocketSubscription());
    const bind = await bindingToken(b, adminToken, sub.json().id as string);
    const client = await socket(bind.url.replace(`:${a.port}/`, `:${b.port}/`));
    client.ws.send(`bind-with-token: ${bind.token}`);
    expect(typeOf(await client.next())).toBe('handshake');
    await new Promise((r) => setTimeout(r, 200));
    const made = await postResource(a, adminToken, { resourceType: 'Patient', name: [{ family: 'Across' }] });
    const note = await client.next();
    expect(typeOf(note)).toBe('event-notification');
    expect(note.entry[1]?.resource?.id).toBe(made.json().id);
    client.ws.close();
  });
});
