// The websocket channel of Subscriptions (API.md §8 "Websocket"; Backport IG STU1.1 channels.html#websockets), with a
// real websocket client (`ws`) against a listening server: $get-ws-binding-token, `bind-with-token: <token>`, the
// notification Bundles the hub's render returns, refusals (expired, forged, garbage, oversized), limits, and two
// instances on one PostgreSQL where an announcement made on one reaches a socket held by the other.
import { randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { loadKeyRing, type KeyRing } from '../../src/auth/keys.js';
import { createBindingTokens, websocketUrl } from '../../src/fhir/subscriptions/binding-token.js';
import { createSocketHub, type SocketHub } from '../../src/fhir/subscriptions/socket-hub.js';
import { localSignals, postgresSignals, type Signals } from '../../src/storage/signals.js';
import { created, startTestApp, type TestApp } from '../support/app.js';
import { testDatabases, type TestDatabase } from '../support/db.js';
import { freePort } from '../support/listen.js';
import { connect as rawConnect } from '../support/raw-http.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Client {
  ws: WebSocket;
  /** The next text message not yet taken; rejects after `ms`. */
  next(ms?: number): Promise<string>;
  /** Messages received and not yet taken. */
  unread(): string[];
  closed: Promise<{ code: number; reason: string }>;
}

function connect(url: string, opts: WebSocket.ClientOptions = {}): Promise<Client> {
  const ws = new WebSocket(url, opts);
  const queue: string[] = [];
  const waiters: ((text: string) => void)[] = [];
  ws.on('message', (data) => {
    const text = (data as Buffer).toString('utf8');
    const w = waiters.shift();
    if (w) w(text);
    else queue.push(text);
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  const client: Client = {
    ws,
    next(ms = 5000) {
      const queued = queue.shift();
      if (queued !== undefined) return Promise.resolve(queued);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(take), 1);
          reject(new Error(`no message within ${ms} ms`));
        }, ms);
        const take = (text: string): void => {
          clearTimeout(timer);
          resolve(text);
        };
        waiters.push(take);
      });
    },
    unread: () => [...queue],
    closed,
  };
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(client));
    ws.once('error', reject);
  });
}

/** A closed socket's code within `ms` (the server closes it), else a failure. */
async function closeCode(c: Client, ms = 5000): Promise<number> {
  const timeout = sleep(ms).then(() => ({ code: -1, reason: 'still open' }));
  return (await Promise.race([c.closed, timeout])).code;
}

/** An HTTP upgrade request to a websocket at `path`, as a client would send it. */
const upgradeRequest = (path: string): string =>
  `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
  `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`;

const outcomeCode = (text: string): string =>
  (JSON.parse(text) as { resourceType: string; issue: { code: string }[] }).issue[0]?.code ?? '';

/** What the test hubs render: one small Bundle per event number, and a handshake naming the subscription. */
const bundle = (id: string, n: number): string =>
  JSON.stringify({ resourceType: 'Bundle', id: `${id}-${n}` });
const handshake = (id: string): string => JSON.stringify({ resourceType: 'Bundle', id: `handshake-${id}` });

interface Renders {
  calls: [string, number, number][];
  gone: Set<string>;
}

function testHub(
  signals: Signals,
  renders: Renders,
  limits: Parameters<typeof createSocketHub>[0]['limits'],
) {
  return createSocketHub({
    signals,
    limits,
    async render(id, from, to) {
      renders.calls.push([id, from, to]);
      return Array.from({ length: to - from + 1 }, (_, i) => bundle(id, from + i));
    },
    async renderHandshake(id) {
      return renders.gone.has(id) ? undefined : handshake(id);
    },
  });
}

const subscription = (type: 'websocket' | 'rest-hook'): Record<string, unknown> => ({
  resourceType: 'Subscription',
  status: 'active',
  reason: 'websocket test',
  criteria: 'Observation?code=http://loinc.org|8867-4',
  channel: type === 'websocket' ? { type } : { type, endpoint: 'https://example.org/hook' },
});

async function bindingToken(t: TestApp, token: string | null, id: string, method = 'GET') {
  const res = await t.request({ method, url: `${t.fhir}/Subscription/${id}/$get-ws-binding-token`, token });
  const body = res.json() as {
    parameter?: { name: string; valueString?: string; valueDateTime?: string; valueUrl?: string }[];
    issue?: { code: string; details?: { text?: string } }[];
  };
  const p = (name: string) => body.parameter?.find((x) => x.name === name);
  return {
    status: res.statusCode,
    body,
    token: p('token')?.valueString ?? '',
    expiration: p('expiration')?.valueDateTime ?? '',
    subscription: p('subscription')?.valueString ?? '',
    url: p('websocket-url')?.valueUrl ?? '',
  };
}

/** Connects to `url`, binds with `token` and returns the client once the handshake has arrived. */
async function bound(url: string, token: string, id: string): Promise<Client> {
  const c = await connect(url);
  c.ws.send(`bind-with-token: ${token}`);
  expect(await c.next()).toBe(handshake(id));
  return c;
}

describe.each(testDatabases())('websocket subscriptions on $name', (database: TestDatabase) => {
  let t: TestApp;
  let hub: SocketHub;
  let wsUrl: string;
  let admin: string;
  let member: string;
  let subId: string;
  let otherSubId: string;
  let keys: KeyRing;
  const renders: Renders = { calls: [], gone: new Set() };
  const open: Client[] = [];
  const track = (c: Client): Client => {
    open.push(c);
    return c;
  };

  beforeAll(async () => {
    const port = await freePort();
    const signals = localSignals();
    hub = testHub(signals, renders, { perSubscription: 5, perInstance: 60, bindingsPerSocket: 3 });
    t = await startTestApp(
      database,
      // The shortest request timeout: a bound socket must outlive it (it is no HTTP request any more).
      { baseUrl: `http://127.0.0.1:${port}/`, requestTimeout: 1000 },
      { signals, subscriptionSockets: hub, websocketLimits: { bindWithinMs: 1500, pingEveryMs: 400 } },
    );
    await t.app.listen({ port, host: '127.0.0.1' });
    wsUrl = `ws://127.0.0.1:${port}/ws/subscriptions-r4`;
    ({ adminToken: admin, memberToken: member } = await t.newProject());
    subId = (await created(t, admin, subscription('websocket'))).id as string;
    otherSubId = (await created(t, admin, subscription('websocket'))).id as string;
    keys = await loadKeyRing(t.db);
  });
  afterAll(async () => {
    for (const c of open) c.ws.terminate();
    await t?.close();
  });

  it('issues a binding token for a websocket Subscription the caller can read (GET and POST)', async () => {
    for (const [token, method] of [
      [admin, 'GET'],
      [member, 'GET'],
      [admin, 'POST'],
    ] as const) {
      const before = Date.now();
      const r = await bindingToken(t, token, subId, method);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.token.split('.')).toHaveLength(3);
      expect(r.subscription).toBe(subId);
      expect(r.url).toBe(wsUrl);
      const lifetime = Date.parse(r.expiration) - before;
      expect(lifetime).toBeGreaterThan(250_000);
      expect(lifetime).toBeLessThanOrEqual(301_000);
    }
  });

  it("answers 404 for another project's Subscription, 400 for a rest-hook one, 401 without a token", async () => {
    const other = await t.newProject();
    const r404 = await bindingToken(t, other.adminToken, subId);
    expect(r404.status).toBe(404);
    expect(r404.body.issue?.[0]?.code).toBe('not-found');
    expect((await bindingToken(t, admin, 'no-such-subscription')).status).toBe(404);
    const hook = (await created(t, admin, subscription('rest-hook'))).id as string;
    const r400 = await bindingToken(t, admin, hook);
    expect(r400.status).toBe(400);
    expect(r400.body.issue?.[0]?.code).toBe('invalid');
    expect(r400.body.issue?.[0]?.details?.text).toMatch(/rest-hook.*websocket/);
    const r401 = await bindingToken(t, null, subId);
    expect(r401.status).toBe(401);
  });

  it('binding tokens and access tokens are not accepted as each other', async () => {
    const { token } = await bindingToken(t, admin, subId);
    const asBearer = await t.request({ method: 'GET', url: `${t.fhir}/Subscription/${subId}`, token });
    expect(asBearer.statusCode).toBe(401);
    const c = track(await connect(wsUrl));
    c.ws.send(`bind-with-token: ${admin}`);
    expect(outcomeCode(await c.next())).toBe('security');
    expect(await closeCode(c)).toBe(1008);
  });

  it('binds with a valid token: the handshake, then the rendered Bundles of each announcement, in order', async () => {
    const { token } = await bindingToken(t, member, subId);
    const c = track(await bound(wsUrl, token, subId));
    const other = track(await bound(wsUrl, (await bindingToken(t, admin, otherSubId)).token, otherSubId));
    const idle = track(await connect(wsUrl));
    expect(hub.boundCount(subId)).toBe(1);
    renders.calls.length = 0;
    await hub.announce(subId, 1, 3);
    await hub.announce(subId, 4, 4);
    for (const n of [1, 2, 3, 4]) expect(await c.next()).toBe(bundle(subId, n));
    expect(renders.calls).toEqual([
      [subId, 1, 3],
      [subId, 4, 4],
    ]);
    await sleep(100);
    // Nothing for a socket bound to another subscription, nothing before a bind.
    expect(other.unread()).toEqual([]);
    expect(idle.unread()).toEqual([]);
    for (const x of [c, other, idle]) x.ws.close();
    await Promise.all([c, other, idle].map((x) => x.closed));
    await sleep(50);
    expect(hub.boundCount(subId)).toBe(0);
  });

  it('binds one socket to several subscriptions, with the `bind-with-token` message repeated', async () => {
    const c = track(await bound(wsUrl, (await bindingToken(t, admin, subId)).token, subId));
    c.ws.send(`bind-with-token: ${(await bindingToken(t, admin, otherSubId)).token}`);
    expect(await c.next()).toBe(handshake(otherSubId));
    await hub.announce(otherSubId, 7, 7);
    expect(await c.next()).toBe(bundle(otherSubId, 7));
    await hub.announce(subId, 8, 8);
    expect(await c.next()).toBe(bundle(subId, 8));
    c.ws.close();
  });

  it('keeps a bound socket past the request timeout, answering pings', async () => {
    const c = track(await bound(wsUrl, (await bindingToken(t, admin, subId)).token, subId));
    await sleep(2500);
    await hub.announce(subId, 9, 9);
    expect(await c.next()).toBe(bundle(subId, 9));
    c.ws.close();
  });

  it('refuses an expired, a forged and a foreign token', async () => {
    const tokens = createBindingTokens(keys, t.config.baseUrl, wsUrl);
    const claims = { subscriptionId: subId, projectId: 'p', caller: 'ClientApplication/x' };
    const expired = (await tokens.issue(claims, new Date(Date.now() - 10 * 60_000))).token;
    // Another key under the same kid: the signature does not verify.
    const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
    const forger: KeyRing = {
      current: { kid: keys.current.kid, privateKey, publicJwk: await exportJWK(publicKey) },
      publicKeys: new Map(),
      jwks: { keys: [] },
    };
    const forged = (await createBindingTokens(forger, t.config.baseUrl, wsUrl).issue(claims, new Date()))
      .token;
    // A valid token's payload swapped for another subscription's.
    const [h, , s] = (await tokens.issue(claims, new Date())).token.split('.');
    const payload = Buffer.from(
      JSON.stringify({ subscription: otherSubId, project: 'p', sub: 'x' }),
    ).toString('base64url');
    const tampered = `${h}.${payload}.${s}`;
    // Signed by this server but for another endpoint.
    const foreign = (
      await createBindingTokens(keys, t.config.baseUrl, websocketUrl('https://elsewhere.test/')).issue(
        claims,
        new Date(),
      )
    ).token;
    for (const [token, text] of [
      [expired, /expired/],
      [forged, /Invalid/],
      [tampered, /Invalid/],
      [foreign, /Invalid/],
    ] as const) {
      const c = track(await connect(wsUrl));
      c.ws.send(`bind-with-token: ${token}`);
      const error = JSON.parse(await c.next()) as { issue: { code: string; details: { text: string } }[] };
      expect(error.issue[0]?.code).toBe('security');
      expect(error.issue[0]?.details.text).toMatch(text);
      expect(await closeCode(c)).toBe(1008);
    }
    expect(hub.boundCount(subId)).toBe(0);
  });

  it('closes only the socket that sends garbage, binary, an oversized message or a flood', async () => {
    const good = track(await bound(wsUrl, (await bindingToken(t, admin, subId)).token, subId));
    const garbage = track(await connect(wsUrl));
    garbage.ws.send('hello there');
    expect(outcomeCode(await garbage.next())).toBe('invalid');
    expect(await closeCode(garbage)).toBe(1008);
    const binary = track(await connect(wsUrl));
    binary.ws.send(Buffer.from([1, 2, 3]));
    expect(await closeCode(binary)).toBe(1003);
    const big = track(await connect(wsUrl));
    big.ws.send(`bind-with-token: ${'x'.repeat(5000)}`);
    expect(await closeCode(big)).toBe(1009);
    // Valid binds, faster than they are handled: a few wait, then the socket is closed.
    const flood = track(await connect(wsUrl));
    const { token } = await bindingToken(t, admin, otherSubId);
    for (let i = 0; i < 40; i++) flood.ws.send(`bind-with-token: ${token}`);
    expect(await closeCode(flood)).toBe(1008);
    const told = flood.unread().filter((m) => m !== handshake(otherSubId));
    expect(told.map(outcomeCode)).toEqual(['throttled']);
    await hub.announce(subId, 10, 10);
    expect(await good.next()).toBe(bundle(subId, 10));
    good.ws.close();
  });

  it('closes a socket that binds nothing in time, and one that stops answering pings', async () => {
    const idle = track(await connect(wsUrl));
    const started = Date.now();
    expect(outcomeCode(await idle.next(3000))).toBe('security');
    expect(await closeCode(idle)).toBe(1008);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
    const deaf = track(await connect(wsUrl, { autoPong: false }));
    deaf.ws.send(`bind-with-token: ${(await bindingToken(t, admin, subId)).token}`);
    expect(await deaf.next()).toBe(handshake(subId));
    // Cut without a close frame: 1006 on the client's side.
    expect(await closeCode(deaf, 3000)).toBe(1006);
  });

  it('bounds sockets per subscription, bindings per socket and sockets per instance; the server keeps serving', async () => {
    const { token } = await bindingToken(t, admin, subId);
    const clients = await Promise.all(Array.from({ length: 7 }, () => connect(wsUrl).then(track)));
    for (const c of clients) c.ws.send(`bind-with-token: ${token}`);
    const first = await Promise.all(clients.map((c) => c.next()));
    expect(first.filter((m) => m === handshake(subId))).toHaveLength(5);
    expect(first.filter((m) => m !== handshake(subId)).map(outcomeCode)).toEqual(['throttled', 'throttled']);
    expect(hub.boundCount(subId)).toBe(5);
    for (const c of clients) c.ws.close();
    await Promise.all(clients.map((c) => c.closed));

    const extra = [await createdWebsocket(), await createdWebsocket()];
    const multi = track(await bound(wsUrl, token, subId));
    multi.ws.send(`bind-with-token: ${(await bindingToken(t, admin, otherSubId)).token}`);
    expect(await multi.next()).toBe(handshake(otherSubId));
    multi.ws.send(`bind-with-token: ${(await bindingToken(t, admin, extra[0] as string)).token}`);
    expect(await multi.next()).toBe(handshake(extra[0] as string));
    multi.ws.send(`bind-with-token: ${(await bindingToken(t, admin, extra[1] as string)).token}`);
    expect(outcomeCode(await multi.next())).toBe('throttled');
    expect(await closeCode(multi)).toBe(1008);

    await sleep(100);
    const many = await Promise.allSettled(Array.from({ length: 80 }, () => connect(wsUrl)));
    const clientsOpen = many.flatMap((r) => (r.status === 'fulfilled' ? [track(r.value)] : []));
    const codes = await Promise.all(clientsOpen.map((c) => closeCode(c, 500)));
    expect(codes.filter((code) => code === 1013)).toHaveLength(80 - 60);
    expect(hub.socketCount()).toBe(60);
    const health = await fetch(`${t.config.baseUrl}fhir/R4/metadata`);
    expect(health.status).toBe(200);
    for (const c of clientsOpen) c.ws.close();
    await Promise.all(clientsOpen.map((c) => c.closed));
    await sleep(100);
    expect(hub.socketCount()).toBe(0);
  });

  async function createdWebsocket(): Promise<string> {
    return (await created(t, admin, subscription('websocket'))).id as string;
  }

  it('revokes: a socket left with no binding is told and closed', async () => {
    const c = track(await bound(wsUrl, (await bindingToken(t, admin, subId)).token, subId));
    await hub.revoke(subId);
    expect(outcomeCode(await c.next())).toBe('informational');
    expect(await closeCode(c)).toBe(1000);
    expect(hub.boundCount(subId)).toBe(0);
  });

  it("tells a client whose subscription's handshake finds it gone, and refuses upgrades elsewhere", async () => {
    const id = await createdWebsocket();
    const { token } = await bindingToken(t, admin, id);
    renders.gone.add(id);
    const c = track(await connect(wsUrl));
    c.ws.send(`bind-with-token:${token}`);
    expect(outcomeCode(await c.next())).toBe('not-found');
    expect(await closeCode(c)).toBe(1008);
    await expect(connect(wsUrl.replace('/ws/subscriptions-r4', '/fhir/R4/Patient'))).rejects.toThrow(/404/);
    // And the server closes those sockets (one left open would also hold the server's close forever).
    for (const path of ['/fhir/R4/Patient', '/fhir/R4/metadata', '/nowhere']) {
      const raw = await rawConnect(Number(new URL(t.config.baseUrl).port));
      raw.socket.write(upgradeRequest(path));
      const ended = await Promise.race([raw.closed.then(() => true), sleep(3000).then(() => false)]);
      expect(ended, `${path}: ${raw.received()}`).toBe(true);
      raw.socket.destroy();
    }
    const plain = await fetch(`${t.config.baseUrl}ws/subscriptions-r4`);
    expect(plain.status).toBe(404);
  });
});

describe('closing the server', () => {
  it('closes bound sockets with 1001 and does not wait for clients that never answer', async () => {
    const port = await freePort();
    const t = await startTestApp(testDatabases()[0] as TestDatabase, {
      baseUrl: `http://127.0.0.1:${port}/`,
    });
    await t.app.listen({ port, host: '127.0.0.1' });
    const { adminToken } = await t.newProject();
    const id = (await created(t, adminToken, subscription('websocket'))).id as string;
    const { token } = await bindingToken(t, adminToken, id);
    const c = await connect(`ws://127.0.0.1:${port}/ws/subscriptions-r4`);
    c.ws.send(`bind-with-token: ${token}`);
    // The app's default hub: the minimal handshake Bundle.
    const hs = JSON.parse(await c.next()) as {
      type: string;
      entry: { resource: { parameter: unknown[] } }[];
    };
    expect(hs.type).toBe('history');
    expect(hs.entry[0]?.resource.parameter).toContainEqual({ name: 'type', valueCode: 'handshake' });
    // A client that completes the upgrade and then never answers the close frame.
    const deaf = await rawConnect(port);
    deaf.socket.write(upgradeRequest('/ws/subscriptions-r4'));
    for (let i = 0; i < 50 && !deaf.received().includes('101 Switching Protocols'); i++) await sleep(20);
    expect(deaf.received()).toContain('101 Switching Protocols');
    const started = Date.now();
    await t.close();
    expect(await closeCode(c)).toBe(1001);
    await deaf.closed;
    expect(Date.now() - started).toBeLessThan(4000);
  });
});

const url = process.env.TEST_DATABASE_URL;
const postgres = testDatabases().find((d) => d.name === 'postgres');

describe.runIf(url && postgres)('websockets on two instances sharing PostgreSQL', () => {
  let a: TestApp;
  let b: TestApp;
  let hubA: SocketHub;
  let hubB: SocketHub;
  const rendersA: Renders = { calls: [], gone: new Set() };
  const rendersB: Renders = { calls: [], gone: new Set() };
  const signals: Signals[] = [];
  let wsB: string;

  beforeAll(async () => {
    const channel = `ws_${randomBytes(4).toString('hex')}`;
    const sig = (): Signals => {
      const s = postgresSignals(url as string, { schema: channel });
      signals.push(s);
      return s;
    };
    const database = postgres as TestDatabase;
    const [portA, portB] = [await freePort(), await freePort()];
    const sa = sig();
    const sb = sig();
    hubA = testHub(sa, rendersA, {});
    hubB = testHub(sb, rendersB, {});
    // One base URL for both, as behind a load balancer: a token issued by one instance binds on the other.
    const baseUrl = `http://127.0.0.1:${portA}/`;
    a = await startTestApp(database, { baseUrl }, { signals: sa, subscriptionSockets: hubA });
    b = await startTestApp(database, { baseUrl }, { db: a.db, signals: sb, subscriptionSockets: hubB });
    await a.app.listen({ port: portA, host: '127.0.0.1' });
    await b.app.listen({ port: portB, host: '127.0.0.1' });
    wsB = `ws://127.0.0.1:${portB}/ws/subscriptions-r4`;
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    for (const s of signals) await s.close();
  });

  it('an announcement on instance A reaches a socket held by instance B; A renders nothing', async () => {
    const { adminToken } = await a.newProject();
    const id = (await created(a, adminToken, subscription('websocket'))).id as string;
    const { token } = await bindingToken(a, adminToken, id);
    const c = await bound(wsB, token, id);
    try {
      expect(hubB.boundCount(id)).toBe(1);
      expect(hubA.boundCount(id)).toBe(0);
      await hubA.announce(id, 1, 2);
      expect(await c.next()).toBe(bundle(id, 1));
      expect(await c.next()).toBe(bundle(id, 2));
      expect(rendersB.calls).toEqual([[id, 1, 2]]);
      expect(rendersA.calls).toEqual([]);
    } finally {
      c.ws.terminate();
    }
  });
});
