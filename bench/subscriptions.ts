// Subscriptions (issue 26, API.md §8) on PostgreSQL: what matching costs a write, and how fast notifications go out.
// 1. Create req/s of Observations in a project with no subscription, and in one with 100 active rest-hook
//    subscriptions on Observation that do not match (each a different code): runs interleaved, medians, the ratio.
// 2. With 100 subscriptions that all match, SUB_EVENTS creates: notifications per second received by a local HTTP
//    endpoint, and commit-to-delivery latency (the Observation's meta.lastUpdated to its arrival), p50 and p99 — a
//    backlog's: the writes outrun delivery. 3. The same latency without a backlog: one subscription, paced writes.
// Run alone with `npx tsx bench/subscriptions.ts` (after `npm run build`), or as part of `npm run bench`.
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

async function receiver(): Promise<{
  host: string;
  url: string;
  arrivals: Arrival[];
  close(): Promise<void>;
}> {
  const arrivals: Arrival[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      const body = Buffer.concat(chunks).toString('utf8');
      if (body) {
        const r = JSON.parse(body) as { meta?: { lastUpdated?: string } };
        arrivals.push({ at, lastUpdated: Date.parse(r.meta?.lastUpdated ?? '') });
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
  const server = await startServer({ DATABASE_URL: url, DATA_DIR: path.join(work, 'files') }, work, {
    allowedOutboundHosts: [rx.host],
  });
  try {
    const admin = await login(server.base);
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

    const busy = await project(server.base, admin, 'subs-busy');
    await subscribe(server.base, busy, rx.url, () => '8867-4');
    rx.arrivals.length = 0;
    const started = Date.now();
    const expected = EVENTS * SUBSCRIPTIONS;
    let next = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next++ < EVENTS) await api(server.base, busy, 'POST', 'Observation', observation('8867-4'));
      }),
    );
    const writesDone = Date.now();
    while (rx.arrivals.length < expected && Date.now() - started < 300_000)
      await new Promise((r) => setTimeout(r, 50));
    const seconds = ((rx.arrivals.at(-1)?.at ?? Date.now()) - started) / 1000;
    const latency = rx.arrivals.map((x) => x.at - x.lastUpdated);
    notes.push(
      `subscriptions: ${EVENTS} matching creates × ${SUBSCRIPTIONS} subscriptions → ${rx.arrivals.length}/${expected} ` +
        `notifications in ${seconds.toFixed(1)} s (${Math.round(rx.arrivals.length / seconds)} notifications/s; writes ` +
        `took ${((writesDone - started) / 1000).toFixed(1)} s); commit-to-delivery latency p50 ${pct(latency, 50)} ms, ` +
        `p99 ${pct(latency, 99)} ms`,
    );

    // Latency without a backlog: one matching subscription, one write every 50 ms.
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
