// npm run soak: a Cinder server (its own process, on PostgreSQL) under mixed load for SOAK_SECONDS (default 300) from
// SOAK_CONNECTIONS (default 50) concurrent clients: reads, searches, creates, updates, transaction Bundles, userinfo
// and reads with an external identity provider's token, and bulk exports that are mostly cancelled, with audit on
// (the default) and subscriptions: SOAK_REST_HOOKS (default 3) classic rest-hook subscriptions whose notifications a
// small HTTP receiver in the soak takes, and SOAK_WEBSOCKETS (default 1) websocket ones (bench/soak-subscriptions.ts),
// each on the Patients of 5 families. Every acknowledged create is recorded; at the end each must be readable and
// the server's count must match (no lost and no duplicated writes), no answer may be a 5xx, every export must have
// reached a final status, every acknowledged write of a subscribed family must have been notified to each of its
// subscriptions, and AuditEvents must have been recorded. Prints p50/p99 per operation, the notifications' lag
// (commit to arrival) and the server's RSS every 10 s. Memory: RSS is sampled every second, and the server runs
// with bench/memory-probe.mjs (its V8 heap and Buffers); after SOAK_WARMUP_SECONDS (default 60) of the same load,
// the median RSS of the last minute of the SOAK_SECONDS measured may exceed that of their first minute by at most
// 10%. SOAK_AUDIT=0 runs without audit (to compare). Exits non-zero when a check fails.
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { families, makePatient } from './patients.js';
import { soakSubscriptions, type SoakSubscriptions } from './soak-subscriptions.js';
import { startMockIdp } from '../test/support/mock-idp.js';
import { login, startServer, type RunningServer } from './server.js';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 300);
/**
 * Seconds of the same load before the SECONDS that are measured (default 60). Under load an export takes more
 * than a minute, so the first minute of load had exports started but none downloaded yet: its memory lacked the
 * downloads in flight that every later minute holds, and the check compared a warming server with a warm one.
 */
const WARMUP = Number(process.env.SOAK_WARMUP_SECONDS ?? 60);
const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 50);
/**
 * Patients stored before the load starts. The answers of `$csv` by family (up to 1000 rows) and the exports (every
 * Patient) grow with the data; starting from a filled database makes them full-sized from the first minute, so that
 * memory growth over the soak shows a leak rather than larger answers.
 */
const SEED = Math.max(200, Number(process.env.SOAK_SEED_PATIENTS ?? 20_000));
/**
 * The tag of the seed Patients (kept by the updates of a seed Patient). The exports and `$csv` read only these: the
 * load adds Patients at 40–100 a second, which made the exported files 1.5–2.5 times larger in the last minute than
 * in the first (and more downloads overlapping), a growth of the answers that the memory check took for a leak.
 */
const SEED_TAG = { system: 'https://cinder.example/soak', code: 'seed' };
const SEED_FILTER = `_tag=${encodeURIComponent(`${SEED_TAG.system}|${SEED_TAG.code}`)}`;
const PRINT_EVERY_S = 10;
/** The memory check: the last minute's median RSS at most this much above the first minute's. */
const RSS_GROWTH_ALLOWED = 0.1;
const MINUTE = Math.min(60, SECONDS / 2);
const FHIR_JSON = 'application/fhir+json';
const REST_HOOKS = Number(process.env.SOAK_REST_HOOKS ?? 3);
const WEBSOCKETS = Number(process.env.SOAK_WEBSOCKETS ?? 1);
const AUDIT = process.env.SOAK_AUDIT !== '0';
/** The database the soak makes (and drops first): SOAK_DB, default cinder_soak. */
const SOAK_DB = /^[a-z_][a-z0-9_]{0,62}$/.test(process.env.SOAK_DB ?? '')
  ? (process.env.SOAK_DB as string)
  : 'cinder_soak';

interface Ctx {
  base: string;
  fhir: string;
  auth: string;
  external: string;
  /** Ids of every acknowledged create, in order. */
  created: string[];
  /** Export jobs started, and what was asked of them. */
  exports: { id: string; cancelled: boolean }[];
  /** Export files downloaded: when (ms since the epoch) and their size in bytes. */
  downloads: { at: number; bytes: number }[];
  /** The first `seeded` of `created` are the seed Patients. */
  seeded: number;
  n: number;
  subs: SoakSubscriptions;
}

/** The family name of a Patient of makePatient. */
const familyOf = (p: Record<string, unknown>): string =>
  (p.name as { family: string }[])[0]?.family as string;

/** An acknowledged Patient write (its answer's body): the subscriptions of its family must notify it. */
function written(ctx: Ctx, sent: Record<string, unknown>, body: string): void {
  const r = JSON.parse(body) as { id: string; meta: { versionId: string } };
  ctx.subs.expect(familyOf(sent), r.id, r.meta.versionId);
}

interface Stat {
  latencies: number[];
  /** Answers whose status was not one the operation expects (5xx counted separately too). */
  unexpected: number;
  serverErrors: number;
  networkErrors: number;
  samples: string[];
}

const stats = new Map<string, Stat>();
function stat(op: string): Stat {
  let s = stats.get(op);
  if (!s)
    stats.set(op, (s = { latencies: [], unexpected: 0, serverErrors: 0, networkErrors: 0, samples: [] }));
  return s;
}

/** One timed HTTP call, counted under `op`; `ok` lists the statuses the operation expects. */
async function call(
  op: string,
  ok: number[],
  url: string,
  init: RequestInit & { headers?: Record<string, string> },
): Promise<{ status: number; body: string } | undefined> {
  const s = stat(op);
  const started = performance.now();
  try {
    const res = await fetch(url, init);
    const body = await res.text();
    s.latencies.push(performance.now() - started);
    if (res.status >= 500) s.serverErrors++;
    if (!ok.includes(res.status)) {
      s.unexpected++;
      if (s.samples.length < 3)
        s.samples.push(`${init.method ?? 'GET'} ${url} → ${res.status} ${body.slice(0, 200)}`);
    }
    return { status: res.status, body };
  } catch (err) {
    s.networkErrors++;
    if (s.samples.length < 3) s.samples.push(`${url}: ${(err as Error).message}`);
    return undefined;
  }
}

const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)] as T;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const json = (ctx: Ctx, token = ctx.auth) => ({
  authorization: `Bearer ${token}`,
  'content-type': FHIR_JSON,
});

/** The operations of the mix: name, weight, and one iteration. A further operation is one more row. */
const OPERATIONS: { name: string; weight: number; run: (ctx: Ctx) => Promise<void> }[] = [
  {
    name: 'read',
    weight: 30,
    run: async (ctx) => {
      await call('read', [200], `${ctx.fhir}/Patient/${pick(ctx.created)}`, { headers: json(ctx) });
    },
  },
  {
    name: 'search',
    weight: 18,
    run: async (ctx) => {
      const q = `family=${encodeURIComponent(pick(families()))}&_count=20`;
      await call('search', [200], `${ctx.fhir}/Patient?${q}`, { headers: json(ctx) });
    },
  },
  {
    name: 'create',
    weight: 15,
    run: async (ctx) => {
      const patient = makePatient(ctx.n++);
      const res = await call('create', [201], `${ctx.fhir}/Patient`, {
        method: 'POST',
        headers: json(ctx),
        body: JSON.stringify(patient),
      });
      if (res?.status !== 201) return;
      ctx.created.push((JSON.parse(res.body) as { id: string }).id);
      written(ctx, patient, res.body);
    },
  },
  {
    name: '$csv (family, 6 fields)',
    weight: 3,
    run: async (ctx) => {
      const q = `family=${encodeURIComponent(pick(families()))}&${SEED_FILTER}&_fields=id,name,address,telecom,birthDate,gender`;
      await call('$csv (family, 6 fields)', [200], `${ctx.fhir}/Patient/$csv?${q}`, { headers: json(ctx) });
    },
  },
  {
    name: 'update',
    weight: 10,
    run: async (ctx) => {
      const at = Math.floor(Math.random() * ctx.created.length);
      const id = ctx.created[at] as string;
      const patient = {
        ...makePatient(ctx.n++),
        id,
        ...(at < ctx.seeded ? { meta: { tag: [SEED_TAG] } } : {}),
      };
      const res = await call('update', [200], `${ctx.fhir}/Patient/${id}`, {
        method: 'PUT',
        headers: json(ctx),
        body: JSON.stringify(patient),
      });
      if (res?.status === 200) written(ctx, patient, res.body);
    },
  },
  {
    name: 'transaction (5 creates)',
    weight: 5,
    run: async (ctx) => {
      const entry = Array.from({ length: 5 }, () => ({
        fullUrl: `urn:uuid:${crypto.randomUUID()}`,
        resource: makePatient(ctx.n++),
        request: { method: 'POST', url: 'Patient' },
      }));
      const res = await call('transaction (5 creates)', [200], ctx.fhir, {
        method: 'POST',
        headers: json(ctx),
        body: JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry }),
      });
      if (res?.status !== 200) return;
      const answers = (JSON.parse(res.body) as { entry: { response: { location: string } }[] }).entry;
      answers.forEach((e, i) => {
        // `Patient/<id>/_history/<version>`
        const [, id, , version] = e.response.location.split('/') as [string, string, string, string];
        ctx.created.push(id);
        ctx.subs.expect(familyOf(entry[i]?.resource as Record<string, unknown>), id, version);
      });
    },
  },
  {
    name: 'userinfo (external token)',
    weight: 8,
    run: async (ctx) => {
      await call('userinfo (external token)', [200], `${ctx.base}oauth2/userinfo`, {
        headers: { authorization: `Bearer ${ctx.external}` },
      });
    },
  },
  {
    name: 'read (external token)',
    weight: 6,
    run: async (ctx) => {
      await call('read (external token)', [200], `${ctx.fhir}/Patient/${pick(ctx.created)}`, {
        headers: { authorization: `Bearer ${ctx.external}` },
      });
    },
  },
  {
    name: 'export + cancel',
    weight: 1,
    run: async (ctx) => {
      const kick = await call(
        'export kick-off',
        [202],
        `${ctx.fhir}/Patient/$export?_type=Patient&_typeFilter=${encodeURIComponent(`Patient?${SEED_FILTER}`)}`,
        {
          headers: { ...json(ctx), prefer: 'respond-async' },
        },
      );
      if (kick?.status !== 202) return;
      const id = (JSON.parse(kick.body) as { issue: { details: { text: string } }[] }).issue[0]?.details.text
        .split('/')
        .pop() as string;
      // Three in four are cancelled after a moment; the rest run to the end and a file is fetched.
      const cancel = Math.random() < 0.75;
      ctx.exports.push({ id, cancelled: cancel });
      if (cancel) {
        await sleep(Math.random() * 500);
        await call('export $cancel', [200, 400], `${ctx.fhir}/AsyncJob/${id}/$cancel`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ctx.auth}` },
        });
        return;
      }
      for (let i = 0; i < 600; i++) {
        const res = await call('export status', [200, 202], `${ctx.fhir}/AsyncJob/${id}`, {
          headers: json(ctx),
        });
        if (res?.status === 200) {
          const url = (
            JSON.parse(res.body) as { output?: { parameter: { part: { valueUri?: string }[] }[] } }
          ).output?.parameter[0]?.part.find((p) => p.valueUri)?.valueUri;
          if (!url) return;
          const file = await call('export file', [200], url, { headers: json(ctx) });
          if (file) ctx.downloads.push({ at: Date.now(), bytes: Buffer.byteLength(file.body) });
          return;
        }
        await sleep(500);
      }
    },
  },
];

const TOTAL_WEIGHT = OPERATIONS.reduce((n, o) => n + o.weight, 0);
function chooseOperation(): (typeof OPERATIONS)[number] {
  let r = Math.random() * TOTAL_WEIGHT;
  for (const o of OPERATIONS) if ((r -= o.weight) < 0) return o;
  return OPERATIONS[0] as (typeof OPERATIONS)[number];
}

const percentile = (xs: number[], p: number): number => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
};

const median = (xs: number[]): number => percentile(xs, 50);

interface Probe {
  t: number;
  rss: number;
  heapTotal: number;
  heapUsed: number;
  oldSpace: number;
  largeObjects: number;
  external: number;
}

/** Medians of the first and last minute of load: RSS (every second) and the probe's heap figures. */
function memoryTrend(
  rss: { t: number; mb: number }[],
  probe: Probe[],
  seconds: number,
): { first: number; last: number; table: Record<string, string | number>[] } {
  const minute = <T extends { t: number }>(xs: T[], from: number): T[] =>
    xs.filter((x) => x.t >= from && x.t < from + MINUTE);
  const first = median(minute(rss, 0).map((r) => r.mb));
  const last = median(minute(rss, seconds - MINUTE).map((r) => r.mb));
  const row = (label: string, from: number): Record<string, string | number> => {
    const p = minute(probe, from);
    const m = (k: keyof Probe): number => median(p.map((x) => x[k]));
    return {
      minute: label,
      'RSS MB': median(minute(rss, from).map((r) => r.mb)),
      // V8's committed heap (counted in RSS whether used or not), and what RSS holds beyond it and the Buffers:
      // code, stacks and native allocations (malloc: zlib, the pg parser's buffers, fragmentation).
      'heap total': m('heapTotal'),
      'outside heap': median(p.map((x) => x.rss - x.heapTotal - x.external)),
      'heap used': m('heapUsed'),
      'old space': m('oldSpace'),
      'large objects': m('largeObjects'),
      'external (Buffers)': m('external'),
    };
  };
  return { first, last, table: [row('first', 0), row('last', seconds - MINUTE)] };
}

function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024);
}

/** A project with an admin client, an external user in it, and SEED Patients to start from. */
async function setUp(
  base: string,
  idpToken: (sub: string) => Promise<string>,
  subs: SoakSubscriptions,
): Promise<Ctx> {
  const fhir = `${base}fhir/R4`;
  const admin = await login(base);
  const post = async (
    url: string,
    body: unknown,
    token = admin,
    type = FHIR_JSON,
  ): Promise<Record<string, unknown>> => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': type },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`set-up ${url} failed: ${res.status} ${await res.text()}`);
    return (await res.json()) as Record<string, unknown>;
  };
  const project = await post(`${fhir}/Project`, { resourceType: 'Project', name: 'Soak' });
  const secret = `soak-${crypto.randomUUID()}`;
  const client = await post(`${fhir}/ClientApplication`, {
    resourceType: 'ClientApplication',
    name: 'soak',
    secret,
    meta: { project: project.id },
  });
  await post(`${fhir}/ProjectMembership`, {
    resourceType: 'ProjectMembership',
    meta: { project: project.id },
    project: { reference: `Project/${project.id as string}` },
    user: { reference: `ClientApplication/${client.id as string}` },
    profile: { reference: `ClientApplication/${client.id as string}` },
    admin: true,
  });
  const tokenRes = await fetch(`${base}oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: client.id as string,
      client_secret: secret,
    }),
  });
  const auth = ((await tokenRes.json()) as { access_token: string }).access_token;
  await post(
    `${base}admin/projects/${project.id as string}/invite`,
    { resourceType: 'Practitioner', firstName: 'Soak', lastName: 'External', externalId: 'soak|external' },
    auth,
    'application/json',
  );
  const ctx: Ctx = {
    base,
    fhir,
    auth,
    external: await idpToken('soak|external'),
    created: [],
    exports: [],
    downloads: [],
    seeded: 0,
    n: 0,
    subs,
  };
  // The seed Patients, in batches of 500 from 4 clients.
  const batches = Array.from({ length: Math.ceil(SEED / 500) }, (_, b) => Math.min(500, SEED - b * 500));
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let size = batches.pop(); size !== undefined; size = batches.pop()) {
        const entry = Array.from({ length: size }, () => ({
          resource: { ...makePatient(ctx.n++), meta: { tag: [SEED_TAG] } },
          request: { method: 'POST', url: 'Patient' },
        }));
        const batch = await post(fhir, { resourceType: 'Bundle', type: 'batch', entry }, auth);
        for (const e of batch.entry as { response: { location: string } }[])
          ctx.created.push(e.response.location.split('/')[1] as string);
      }
    }),
  );
  ctx.seeded = ctx.created.length;
  // After the seed, so that only the load's writes notify.
  await subs.subscribe(fhir, base, auth);
  return ctx;
}

/** The checks after the load: returns the failures. */
async function verify(ctx: Ctx): Promise<string[]> {
  const failures: string[] = [];
  const unique = new Set(ctx.created);
  if (unique.size !== ctx.created.length)
    failures.push(`${ctx.created.length - unique.size} acknowledged creates share an id`);
  const ids = [...unique];
  let missing = 0;
  for (let i = 0; i < ids.length; i += 100) {
    const chunk = ids.slice(i, i + 100);
    const res = await fetch(`${ctx.fhir}/Patient?_id=${chunk.join(',')}&_count=100&_elements=id`, {
      headers: json(ctx),
    });
    const found = new Set(
      ((await res.json()) as { entry?: { resource: { id: string } }[] }).entry?.map((e) => e.resource.id),
    );
    missing += chunk.filter((id) => !found.has(id)).length;
  }
  if (missing > 0) failures.push(`${missing} acknowledged creates are not readable`);
  const count = (await (
    await fetch(`${ctx.fhir}/Patient?_summary=count`, { headers: json(ctx) })
  ).json()) as {
    total: number;
  };
  if (count.total !== ids.length)
    failures.push(`the server counts ${count.total} Patients, ${ids.length} creates were acknowledged`);
  // Every export reached a final status: cancelled ones (when the cancel came in time) without output.
  const until = Date.now() + 60_000;
  for (const e of ctx.exports) {
    for (;;) {
      const res = await fetch(`${ctx.fhir}/AsyncJob/${e.id}`, { headers: json(ctx) });
      const job = (await res.json()) as { status: string; output?: unknown };
      if (res.status === 200) {
        if (job.status === 'cancelled' && job.output !== undefined)
          failures.push(`cancelled export ${e.id} has output`);
        if (!['cancelled', 'completed'].includes(job.status))
          failures.push(`export ${e.id} ended ${job.status}`);
        if (!e.cancelled && job.status !== 'completed') failures.push(`export ${e.id} ended ${job.status}`);
        break;
      }
      if (Date.now() > until) {
        failures.push(`export ${e.id} still ${job.status} a minute after the load`);
        break;
      }
      await sleep(500);
    }
  }
  const missed = await ctx.subs.settle(60_000);
  if (missed > 0)
    failures.push(`${missed} notifications of acknowledged writes did not arrive within a minute`);
  for (const [op, s] of stats) {
    if (s.serverErrors) failures.push(`${op}: ${s.serverErrors} answers were 5xx`);
    if (s.networkErrors) failures.push(`${op}: ${s.networkErrors} requests failed`);
    if (s.unexpected)
      failures.push(`${op}: ${s.unexpected} unexpected answers, e.g. ${s.samples.join(' | ')}`);
  }
  return failures;
}

/** AuditEvents the server recorded (its `audit_events` table). */
async function auditEvents(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM audit_events')).rows[0]?.n);
  } finally {
    await client.end();
  }
}

async function createDatabase(): Promise<string> {
  const adminUrl =
    process.env.SOAK_DATABASE_URL ??
    process.env.BENCH_DATABASE_URL ??
    'postgres://postgres@127.0.0.1:5432/postgres';
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${SOAK_DB} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${SOAK_DB}`);
  } finally {
    await client.end();
  }
  const u = new URL(adminUrl);
  u.pathname = `/${SOAK_DB}`;
  return u.toString();
}

async function main(): Promise<void> {
  // SOAK_MAIN: another checkout's build (already built), to compare two versions in one sitting.
  if (!process.env.SOAK_MAIN) execSync('npm run build', { stdio: 'inherit' });
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-soak-'));
  const idp = await startMockIdp();
  const subs = await soakSubscriptions(families(), { restHooks: REST_HOOKS, websockets: WEBSOCKETS });
  const databaseUrl = await createDatabase();
  let server: RunningServer | undefined;
  const rss: { t: number; mb: number }[] = [];
  const probeFile = path.join(work, 'memory.jsonl');
  let failures: string[] = [];
  try {
    server = await startServer(
      {
        DATABASE_URL: databaseUrl,
        DATA_DIR: path.join(work, 'data'),
        MEM_PROBE_FILE: probeFile,
        MEM_PROBE_EVERY_MS: '2000',
        ...(process.env.SOAK_REDIS_URL ? { REDIS_URL: process.env.SOAK_REDIS_URL } : {}),
      },
      work,
      {
        externalAuthProviders: [{ issuer: idp.issuer, userInfoUrl: idp.userInfoUrl }],
        // Every soak client exports as one admin: the per-user export quota would answer most kick-offs 429.
        maxActiveExportsPerUser: 1000,
        // The subscriptions' receiver listens on loopback (API.md §2 outbound rule).
        allowedOutboundHosts: [subs.host],
        audit: AUDIT,
      },
      {
        ...(process.env.SOAK_MAIN ? { main: process.env.SOAK_MAIN } : {}),
        nodeArgs: [
          '--import',
          path.resolve('bench/memory-probe.mjs'),
          ...(process.env.SOAK_NODE_ARGS?.split(/\s+/).filter(Boolean) ?? []),
        ],
      },
    );
    const pid = server.pid;
    const ctx = await setUp(server.base, (sub) => idp.token({ sub }, { lifetime: SECONDS + 3600 }), subs);
    console.log(
      `soak: ${SECONDS} s after ${WARMUP} s of warm-up, ${CONNECTIONS} connections, ${SEED} Patients to start from, server pid ${pid}`,
    );
    const loadStarted = Date.now();
    // `t` counts from the end of the warm-up (negative during it).
    const started = loadStarted + WARMUP * 1000;
    const deadline = started + SECONDS * 1000;
    let printed = -WARMUP;
    const sampler = setInterval(() => {
      const t = (Date.now() - started) / 1000;
      rss.push({ t, mb: rssMb(pid) });
      if (t < printed + PRINT_EVERY_S) return;
      printed += PRINT_EVERY_S;
      const done = [...stats.values()].reduce((n, s) => n + s.latencies.length, 0);
      console.log(
        `  ${printed} s${printed <= 0 ? ' (warm-up)' : ''}: ${done} requests, ${ctx.created.length} Patients, RSS ${rss.at(-1)?.mb} MB`,
      );
    }, 1000);
    await Promise.all(
      Array.from({ length: CONNECTIONS }, async () => {
        while (Date.now() < deadline) await chooseOperation().run(ctx);
      }),
    );
    clearInterval(sampler);
    const elapsed = (Date.now() - loadStarted) / 1000;
    const probe = fs.existsSync(probeFile)
      ? fs
          .readFileSync(probeFile, 'utf8')
          .trim()
          .split('\n')
          .map((l) => {
            const p = JSON.parse(l) as Omit<Probe, 't'> & { at: number };
            return { ...p, t: (p.at - started) / 1000 };
          })
      : [];
    const memory = memoryTrend(rss, probe, SECONDS);
    failures = await verify(ctx);
    const audited = await auditEvents(databaseUrl);
    if (AUDIT && audited === 0) failures.push('no AuditEvent was recorded');
    const total = [...stats.values()].reduce((n, s) => n + s.latencies.length, 0);
    console.log(
      `\nCinder soak on PostgreSQL: ${SECONDS} s after ${WARMUP} s of warm-up, ${CONNECTIONS} connections, ${total} requests (${Math.round(total / elapsed)}/s), ` +
        `${ctx.created.length} acknowledged creates, ${ctx.exports.length} exports (${ctx.exports.filter((e) => e.cancelled).length} cancelled), ` +
        `${os.cpus().length} CPUs, Node ${process.version}\n`,
    );
    console.table(
      [...stats.entries()].map(([op, s]) => ({
        operation: op,
        requests: s.latencies.length,
        'p50 ms': Number(percentile(s.latencies, 50).toFixed(1)),
        'p99 ms': Number(percentile(s.latencies, 99).toFixed(1)),
        'max ms': Number(Math.max(...s.latencies).toFixed(1)),
        '5xx': s.serverErrors,
        'other unexpected': s.unexpected - s.serverErrors + s.networkErrors,
      })),
    );
    const lags = subs.lags();
    if (lags.length > 0)
      console.log(
        `Subscriptions (${REST_HOOKS} rest-hook, ${WEBSOCKETS} websocket): ${subs.received()} notifications received; ` +
          `commit-to-arrival lag p50 ${Math.round(percentile(lags, 50))} ms, p99 ${Math.round(percentile(lags, 99))} ms, ` +
          `max ${Math.round(Math.max(...lags))} ms (${lags.length} versions)`,
      );
    console.log(`AuditEvents recorded: ${audited}${AUDIT ? '' : ' (audit off)'}`);
    const fileMb = (from: number): string => {
      const xs = ctx.downloads.filter(
        (d) => d.at - started >= from * 1000 && d.at - started < (from + MINUTE) * 1000,
      );
      return xs.length ? (median(xs.map((d) => d.bytes)) / 1048576).toFixed(1) : '-';
    };
    console.log(
      `Export files downloaded: ${ctx.downloads.length}, median size ${fileMb(0)} MB in the first ${MINUTE} s, ` +
        `${fileMb(SECONDS - MINUTE)} MB in the last`,
    );
    console.log(`Server memory, medians of the first and last ${MINUTE} s of load (MB):`);
    console.table(memory.table);
    const growth = memory.last / memory.first - 1;
    const warming = median(rss.filter((r) => r.t >= -WARMUP && r.t < -WARMUP + MINUTE).map((r) => r.mb));
    console.log(
      `RSS: ${memory.first} → ${memory.last} MB (${growth >= 0 ? '+' : ''}${(growth * 100).toFixed(1)}%, allowed +${RSS_GROWTH_ALLOWED * 100}%); ` +
        `peak (VmHWM) ${server.peakRssMb()} MB` +
        (WARMUP > 0 ? `; the first ${MINUTE} s of the warm-up had ${warming} MB` : ''),
    );
    if (growth > RSS_GROWTH_ALLOWED)
      failures.push(
        `server RSS grew ${(growth * 100).toFixed(1)}% from the first minute of load to the last (median ${memory.first} → ${memory.last} MB)`,
      );
  } finally {
    await server?.stop();
    await idp.close();
    await subs.close();
    fs.rmSync(work, { recursive: true, force: true });
  }
  if (failures.length) {
    console.error(`\nSOAK FAILED:\n- ${failures.join('\n- ')}`);
    process.exit(1);
  }
  console.log('\nSoak passed: no 5xx, every acknowledged create readable, counts match, every export final.');
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
