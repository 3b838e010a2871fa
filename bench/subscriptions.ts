// Subscriptions (issue 26, API.md §8) on PostgreSQL: what matching costs a write, and how fast notifications go out.
// 1. Create req/s of Observations in a project with no subscription, and in one with 100 active rest-hook
//    subscriptions on Observation that do not match (each a different code): runs interleaved, medians, the ratio.
// 2. With 100 subscriptions that all match, SUB_EVENTS creates: notifications per second received by a local HTTP
//    endpoint, and commit-to-delivery latency (the Observation's meta.lastUpdated to its arrival), p50 and p99 — a
//    backlog's: the writes outrun delivery. 2b. The same with SUB_TOPIC (default 10) topic-based rest-hook
//    subscriptions (full-resource; several events per notification Bundle where a backlog allows), and the POSTs they
//    took. 3. The same latency without a backlog: one subscription, paced writes.
// Run alone with `npx tsx bench/subscriptions.ts` (after `npm run build`), or as part of `npm run bench`. To compare
// builds in one sitting: SUB_MAIN=<another checkout>/dist/main.js runs that build instead of this one's; SUB_PARTS
// (default `creates,backlog,topic,paced`) chooses the parts.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { dropDatabase, freshDatabase, login, startServer } from './server.js';

const SUBSCRIPTIONS = 100;
const EVENTS = Number(process.env.SUB_EVENTS ?? 200);
const PACED = 100;
const TOPIC_SUBSCRIPTIONS = Number(process.env.SUB_TOPIC ?? 10);
const PARTS = new Set((process.env.SUB_PARTS ?? 'creates,backlog,topic,paced').split(','));
const TOPIC = 'http://example.org/bench/heart-rate';
const B = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))] as number;
};

const observation = (code: string): Record<string, unknown> => ({
  resourceType: 'Observation',
  status: 'final',
  code: { coding: [{ system: 'http://loinc.org', code }] },
  valueQuantity: { value: 70, unit: '/min' },
});

interface Arrival {
  at: number;
  lastUpdated: number;
}

interface Received {
  resourceType?: string;
  type?: string;
  meta?: { lastUpdated?: string };
  entry?: { resource?: Received & { parameter?: { name: string; valueCode?: string }[] } }[];
}

async function receiver(): Promise<{
  host: string;
  url: string;
  arrivals: Arrival[];
  /** Requests received (a topic notification may carry several arrivals). */
  posts: { n: number };
  close(): Promise<void>;
}> {
  const arrivals: Arrival[] = [];
  const posts = { n: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      const body = Buffer.concat(chunks).toString('utf8');
      posts.n++;
      if (body) {
        const r = JSON.parse(body) as Received;
        if (r.resourceType !== 'Bundle')
          arrivals.push({ at, lastUpdated: Date.parse(r.meta?.lastUpdated ?? '') });
        else {
          // A topic notification: one arrival per event's resource (not the handshake's or a heartbeat's).
          const type = r.entry?.[0]?.resource?.parameter?.find((x) => x.name === 'type')?.valueCode;
          if (type === 'event-notification')
            for (const e of r.entry?.slice(1) ?? [])
              arrivals.push({ at, lastUpdated: Date.parse(e.resource?.meta?.lastUpdated ?? '') });
        }
      }
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    host: `127.0.0.1:${port}`,
    url: `http://127.0.0.1:${port}/hook`,
    arrivals,
    posts,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

async function api(
  base: string,
  token: string,
  method: string,
  url: string,
  body?: unknown,
): Promise<unknown> {
  const res = await fetch(`${base}fhir/R4/${url}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** A project with an admin client; answers a token of that client. */
async function project(base: string, admin: string, name: string): Promise<string> {
  const p = (await api(base, admin, 'POST', 'Project', { resourceType: 'Project', name })) as { id: string };
  const secret = `bench-${name}-secret-0123456789`;
  const c = (await api(base, admin, 'POST', 'ClientApplication', {
    resourceType: 'ClientApplication',
    name,
    secret,
    meta: { project: p.id },
  })) as { id: string };
  await api(base, admin, 'POST', 'ProjectMembership', {
    resourceType: 'ProjectMembership',
    meta: { project: p.id },
    project: { reference: `Project/${p.id}` },
    user: { reference: `ClientApplication/${c.id}` },
    profile: { reference: `ClientApplication/${c.id}` },
    admin: true,
  });
  const res = await fetch(`${base}oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: c.id, client_secret: secret }),
  });
  return ((await res.json()) as { access_token: string }).access_token;
}

async function subscribe(
  base: string,
  token: string,
  endpoint: string,
  code: (i: number) => string,
  count = SUBSCRIPTIONS,
): Promise<void> {
  for (let i = 0; i < count; i++) {
    await api(base, token, 'POST', 'Subscription', {
      resourceType: 'Subscription',
      status: 'active',
      reason: 'bench',
      criteria: `Observation?code=http://loinc.org|${code(i)}`,
      channel: { type: 'rest-hook', endpoint, payload: 'application/fhir+json' },
    });
  }
}

/** A SubscriptionTopic on Observation creates, and `count` full-resource rest-hook subscriptions to it. */
async function subscribeTopic(base: string, token: string, endpoint: string, count: number): Promise<void> {
  await api(base, token, 'POST', 'SubscriptionTopic', {
    resourceType: 'SubscriptionTopic',
    url: TOPIC,
    status: 'active',
    resourceTrigger: [{ resource: 'Observation', supportedInteraction: ['create'] }],
    canFilterBy: [{ resource: 'Observation', filterParameter: 'code' }],
  });
  for (let i = 0; i < count; i++) {
    await api(base, token, 'POST', 'Subscription', {
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'bench',
      criteria: TOPIC,
      _criteria: {
        extension: [
          { url: `${B}/backport-filter-criteria`, valueString: 'Observation?code=http://loinc.org|8867-4' },
        ],
      },
      channel: {
        type: 'rest-hook',
        endpoint,
        payload: 'application/fhir+json',
        _payload: { extension: [{ url: `${B}/backport-payload-content`, valueCode: 'full-resource' }] },
      },
    });
  }
}

/** `events` matching creates from 4 clients; then waits for `expected` arrivals; the note's figures. */
async function backlog(
  base: string,
  token: string,
  rx: Awaited<ReturnType<typeof receiver>>,
  events: number,
  expected: number,
): Promise<string> {
  rx.arrivals.length = 0;
  rx.posts.n = 0;
  const started = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next++ < events) await api(base, token, 'POST', 'Observation', observation('8867-4'));
    }),
  );
  const writesDone = Date.now();
  while (rx.arrivals.length < expected && Date.now() - started < 300_000)
    await new Promise((r) => setTimeout(r, 50));
  const seconds = ((rx.arrivals.at(-1)?.at ?? Date.now()) - started) / 1000;
  const latency = rx.arrivals.map((x) => x.at - x.lastUpdated);
  return (
    `${rx.arrivals.length}/${expected} notified events in ${seconds.toFixed(1)} s in ${rx.posts.n} POSTs ` +
    `(${Math.round(rx.arrivals.length / seconds)} events/s; writes took ${((writesDone - started) / 1000).toFixed(1)} s); ` +
    `commit-to-delivery latency p50 ${pct(latency, 50)} ms, p99 ${pct(latency, 99)} ms`
  );
}

async function creates(base: string, token: string, duration: number): Promise<number> {
  const body = JSON.stringify(observation('8867-4'));
  const r = await autocannon({
    url: base,
    connections: 10,
    duration,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
    requests: [{ method: 'POST', path: '/fhir/R4/Observation', body }],
  });
  if (r.non2xx + r.errors > 0) throw new Error(`creates failed: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return r.requests.average;
}

export async function benchSubscriptions(runs: number, duration: number, notes: string[]): Promise<void> {
  const rx = await receiver();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-bench-subs-'));
  fs.chmodSync(work, 0o755);
  const db = 'cinder_bench_subs';
  const url = await freshDatabase(db);
  const server = await startServer(
    { DATABASE_URL: url, DATA_DIR: path.join(work, 'files') },
    work,
    { allowedOutboundHosts: [rx.host] },
    process.env.SUB_MAIN ? { main: process.env.SUB_MAIN } : {},
  );
  if (process.env.SUB_MAIN) notes.push(`subscriptions: build ${process.env.SUB_MAIN}`);
  try {
    const admin = await login(server.base);
    if (PARTS.has('creates')) {
      const none = await project(server.base, admin, 'subs-none');
      const idle = await project(server.base, admin, 'subs-idle');
      await subscribe(server.base, idle, rx.url, (i) => `nomatch-${i}`);
      const plain: number[] = [];
      const with100: number[] = [];
      for (let i = 0; i < runs; i++) {
        plain.push(await creates(server.base, none, duration));
        with100.push(await creates(server.base, idle, duration));
      }
      const a = median(plain);
      const b = median(with100);
      notes.push(
        `subscriptions: create Observation ${Math.round(a)} req/s with none, ${Math.round(b)} req/s with ${SUBSCRIPTIONS} ` +
          `active subscriptions on Observation that do not match (ratio ${(b / a).toFixed(2)}; medians of ${runs} interleaved runs)`,
      );
      if (rx.arrivals.length)
        notes.push(`subscriptions: ${rx.arrivals.length} notifications that should not exist`);
    }

    if (PARTS.has('backlog')) {
      const busy = await project(server.base, admin, 'subs-busy');
      await subscribe(server.base, busy, rx.url, () => '8867-4');
      const figures = await backlog(server.base, busy, rx, EVENTS, EVENTS * SUBSCRIPTIONS);
      notes.push(
        `subscriptions: ${EVENTS} matching creates × ${SUBSCRIPTIONS} classic subscriptions → ${figures}`,
      );
    }

    if (PARTS.has('topic')) {
      const topic = await project(server.base, admin, 'subs-topic');
      await subscribeTopic(server.base, topic, rx.url, TOPIC_SUBSCRIPTIONS);
      await new Promise((r) => setTimeout(r, 2000)); // the handshakes
      const figures = await backlog(server.base, topic, rx, EVENTS, EVENTS * TOPIC_SUBSCRIPTIONS);
      notes.push(
        `subscriptions: ${EVENTS} matching creates × ${TOPIC_SUBSCRIPTIONS} topic-based subscriptions → ${figures}`,
      );
    }

    // Latency without a backlog: one matching subscription, one write every 50 ms.
    if (!PARTS.has('paced')) return;
    const paced = await project(server.base, admin, 'subs-paced');
    await subscribe(server.base, paced, rx.url, () => '8867-4', 1);
    rx.arrivals.length = 0;
    for (let i = 0; i < PACED; i++) {
      await api(server.base, paced, 'POST', 'Observation', observation('8867-4'));
      await new Promise((r) => setTimeout(r, 50));
    }
    const until = Date.now() + 30_000;
    while (rx.arrivals.length < PACED && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    const unloaded = rx.arrivals.map((x) => x.at - x.lastUpdated);
    notes.push(
      `subscriptions: one subscription, a matching create every 50 ms: ${rx.arrivals.length}/${PACED} delivered, ` +
        `commit-to-delivery latency p50 ${pct(unloaded, 50)} ms, p99 ${pct(unloaded, 99)} ms`,
    );
  } finally {
    await server.stop();
    await rx.close();
    await dropDatabase(db).catch(() => undefined);
    fs.rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) {
  const notes: string[] = [];
  benchSubscriptions(Number(process.env.BENCH_RUNS ?? 3), Number(process.env.BENCH_DURATION ?? 5), notes)
    .then(() => notes.forEach((n) => console.log(`- ${n}`)))
    .catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
}
