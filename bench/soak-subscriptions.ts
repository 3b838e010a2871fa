// The subscriptions of `npm run soak` (bench/soak.ts): classic rest-hook subscriptions whose notifications a small
// HTTP receiver in the soak takes, and websocket ones bound by a `ws` client, each on Patients of a few families
// (about 5% of the soak's Patient writes each). Every acknowledged write of a matching Patient is expected at each
// subscription of its family at least once (API.md §8 "Delivery"); the lag is the arrival time minus the
// version's `meta.lastUpdated` (the commit, on the same machine's clock).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket from 'ws';

export interface SoakSubscriptions {
  /** `host:port` of the receiver, for the server's `allowedOutboundHosts`. */
  host: string;
  /** Creates the subscriptions in the project of `token` (and binds the websocket ones). */
  subscribe(fhir: string, base: string, token: string): Promise<void>;
  /** Records an acknowledged write of a Patient: the subscriptions of its family must each be told of it. */
  expect(family: string, id: string, versionId: string): void;
  /** Notifications received so far. */
  received(): number;
  /** Waits (at most `ms`) until every expected notification arrived; answers the ones still missing. */
  settle(ms: number): Promise<number>;
  /** Commit-to-arrival lags in ms of the first arrival of each version. */
  lags(): number[];
  close(): Promise<void>;
}

interface Sub {
  id: string;
  channel: 'rest-hook' | 'websocket';
  families: readonly string[];
  /** `id/versionId` expected, and those already received. */
  expected: Set<string>;
  seen: Set<string>;
}

export async function soakSubscriptions(
  families: readonly string[],
  { restHooks = 3, websockets = 1, perSubscription = 5 } = {},
): Promise<SoakSubscriptions> {
  const subs: Sub[] = [];
  const byId = new Map<string, Sub>();
  const lags: number[] = [];
  const sockets: WebSocket[] = [];
  let count = 0;

  const arrived = (sub: Sub | undefined, resource: { id?: string; meta?: Record<string, unknown> }): void => {
    count++;
    if (!sub || !resource.id) return;
    const key = `${resource.id}/${String(resource.meta?.versionId)}`;
    if (sub.seen.has(key)) return;
    sub.seen.add(key);
    const at = Date.parse(String(resource.meta?.lastUpdated));
    if (Number.isFinite(at)) lags.push(Date.now() - at);
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(200).end();
      const body = Buffer.concat(chunks).toString('utf8');
      if (!body) return;
      try {
        arrived(byId.get(String(req.headers['x-cinder-subscription'])), JSON.parse(body) as { id?: string });
      } catch {
        // not JSON: counted as nothing
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;

  const groups = (i: number): string[] =>
    families.slice(i * perSubscription, (i + 1) * perSubscription).filter(Boolean);

  async function subscribe(fhir: string, base: string, token: string): Promise<void> {
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' };
    for (let i = 0; i < restHooks + websockets; i++) {
      const channel = i < restHooks ? 'rest-hook' : 'websocket';
      const fams = groups(i);
      const res = await fetch(`${fhir}/Subscription`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          resourceType: 'Subscription',
          status: 'requested',
          reason: 'soak',
          criteria: `Patient?family=${fams.map(encodeURIComponent).join(',')}`,
          channel: {
            type: channel,
            payload: 'application/fhir+json',
            ...(channel === 'rest-hook' ? { endpoint: `http://127.0.0.1:${port}/hook` } : {}),
          },
        }),
      });
      if (res.status !== 201) throw new Error(`Subscription: ${res.status} ${await res.text()}`);
      const sub: Sub = {
        id: ((await res.json()) as { id: string }).id,
        channel,
        families: fams,
        expected: new Set(),
        seen: new Set(),
      };
      subs.push(sub);
      byId.set(sub.id, sub);
      if (channel === 'websocket') sockets.push(await bind(fhir, base, headers, sub));
    }
  }

  /** A `ws` client bound to `sub`: each notification Bundle's resources (after the status) arrive. */
  async function bind(
    fhir: string,
    base: string,
    headers: Record<string, string>,
    sub: Sub,
  ): Promise<WebSocket> {
    const res = await fetch(`${fhir}/Subscription/${sub.id}/$get-ws-binding-token`, { headers });
    if (!res.ok) throw new Error(`binding token: ${res.status} ${await res.text()}`);
    const ps = (
      (await res.json()) as { parameter: { name: string; valueString?: string; valueUrl?: string }[] }
    ).parameter;
    const token = ps.find((p) => p.name === 'token')?.valueString as string;
    const advertised = new URL(ps.find((p) => p.name === 'websocket-url')?.valueUrl as string);
    // The server's configured base URL may name another host; the path is what counts.
    const url = new URL(advertised.pathname, base);
    url.protocol = 'ws:';
    const ws = new WebSocket(url);
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    const handshake = new Promise<void>((resolve) => ws.once('message', () => resolve()));
    ws.on('message', (data) => {
      const bundle = JSON.parse((data as Buffer).toString('utf8')) as {
        entry?: { resource?: { resourceType?: string; id?: string; meta?: Record<string, unknown> } }[];
      };
      for (const e of bundle.entry ?? [])
        if (e.resource?.resourceType === 'Patient') arrived(sub, e.resource);
    });
    ws.send(`bind-with-token: ${token}`);
    await handshake;
    return ws;
  }

  const missing = (): number =>
    subs.reduce((n, s) => n + [...s.expected].filter((k) => !s.seen.has(k)).length, 0);

  return {
    host: `127.0.0.1:${port}`,
    subscribe,
    expect(family, id, versionId) {
      for (const s of subs) if (s.families.includes(family)) s.expected.add(`${id}/${versionId}`);
    },
    received: () => count,
    async settle(ms) {
      const until = Date.now() + ms;
      while (missing() > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 250));
      return missing();
    },
    lags: () => lags,
    async close() {
      for (const ws of sockets) ws.terminate();
      await new Promise((r) => server.close(r));
    },
  };
}
