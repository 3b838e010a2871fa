// Large Binary reads against other tenants' reads (issue 25 point 7): a built server on PostgreSQL (its Binary
// contents in the database's file_chunks) holds one Binary of BIG_BINARY_MB MiB (50 by default) in project A; 8
// clients of A read it at once as FHIR JSON (`?_format=json`, BIG_BINARY_READERS), BIG_BINARY_ROUNDS times, while
// a client of project B reads one of its Patients over and over. Prints the latency of B's reads (median, p99,
// max) before and during the large reads, the large reads' answers and durations, and the server's peak RSS.
// BIG_BINARY_RAW=1 reads the raw content instead of the JSON; BIG_BINARY_EMBEDDED=1 runs on the embedded
// PostgreSQL (contents in files under the data directory).
//
//   npm run build && npx tsx bench/big-binary.ts
//   BIG_BINARY_MAIN=/tmp/base/dist/main.js npx tsx bench/big-binary.ts   (another build, e.g. a worktree of main)
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dropDatabase, freshDatabase, login, startServer } from './server.js';

const MB = Number(process.env.BIG_BINARY_MB ?? 50);
const READERS = Number(process.env.BIG_BINARY_READERS ?? 8);
const ROUNDS = Number(process.env.BIG_BINARY_ROUNDS ?? 2);
const RAW = process.env.BIG_BINARY_RAW === '1';
const EMBEDDED = process.env.BIG_BINARY_EMBEDDED === '1';
const MAIN = process.env.BIG_BINARY_MAIN ?? 'dist/main.js';
const DB = 'cinder_big_binary';

type Json = Record<string, unknown>;

async function call(base: string, token: string, method: string, url: string, body?: unknown): Promise<Json> {
  const res = await fetch(`${base}fhir/R4/${url}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const json = (await res.json()) as Json;
  if (res.status >= 300)
    throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(json).slice(0, 300)}`);
  return json;
}

/** A project with an admin ClientApplication; returns a token of that client. */
async function project(base: string, superToken: string, name: string): Promise<string> {
  const p = await call(base, superToken, 'POST', 'Project', { resourceType: 'Project', name });
  const secret = `secret-${randomBytes(8).toString('hex')}`;
  const c = await call(base, superToken, 'POST', 'ClientApplication', {
    resourceType: 'ClientApplication',
    name,
    secret,
    meta: { project: p.id },
  });
  await call(base, superToken, 'POST', 'ProjectMembership', {
    resourceType: 'ProjectMembership',
    meta: { project: p.id },
    project: { reference: `Project/${p.id as string}` },
    user: { reference: `ClientApplication/${c.id as string}` },
    profile: { reference: `ClientApplication/${c.id as string}` },
    admin: true,
  });
  const res = await fetch(`${base}oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: c.id as string,
      client_secret: secret,
    }),
  });
  return ((await res.json()) as { access_token: string }).access_token;
}

const quantile = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
};
const summary = (xs: number[]) => ({
  reads: xs.length,
  'median ms': Math.round(quantile(xs, 0.5)),
  'p99 ms': Math.round(quantile(xs, 0.99)),
  'max ms': Math.round(Math.max(...xs)),
});

/** Reads `url` as `token` one after another until `stop()`, returning each read's milliseconds. */
async function readLoop(base: string, token: string, url: string, stop: () => boolean): Promise<number[]> {
  const times: number[] = [];
  while (!stop()) {
    const t0 = performance.now();
    const res = await fetch(`${base}fhir/R4/${url}`, { headers: { authorization: `Bearer ${token}` } });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`read answered ${res.status}`);
    times.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, 20));
  }
  return times;
}

async function main(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-big-binary-'));
  const url = EMBEDDED ? undefined : await freshDatabase(DB);
  const server = await startServer(
    { ...(url ? { DATABASE_URL: url } : {}), DATA_DIR: path.join(work, 'data') },
    work,
    { binaryMaxBytes: MB * 1024 * 1024 },
    { main: MAIN, stdout: fs.openSync('/dev/null', 'w') },
  );
  try {
    const superToken = await login(server.base);
    const a = await project(server.base, superToken, 'Big Binary A');
    const b = await project(server.base, superToken, 'Reader B');
    const content = randomBytes(MB * 1024 * 1024);
    const up = await fetch(`${server.base}fhir/R4/Binary`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a}`, 'content-type': 'application/octet-stream' },
      body: content,
    });
    if (up.status !== 201) throw new Error(`upload answered ${up.status}: ${await up.text()}`);
    const binaryId = ((await up.json()) as { id: string }).id;
    const patient = await call(server.base, b, 'POST', 'Patient', {
      resourceType: 'Patient',
      name: [{ family: 'Reader' }],
    });
    const patientUrl = `Patient/${patient.id as string}`;
    // Idle: B's reads alone for a few seconds.
    const idleEnd = performance.now() + 3000;
    const idle = await readLoop(server.base, b, patientUrl, () => performance.now() > idleEnd);
    const rssBefore = server.peakRssMb();
    let done = false;
    const during = readLoop(server.base, b, patientUrl, () => done);
    const big: { status: number; ms: number; mb: number }[] = [];
    const t0 = performance.now();
    for (let round = 0; round < ROUNDS; round++) {
      await Promise.all(
        Array.from({ length: READERS }, async () => {
          const started = performance.now();
          const res = await fetch(`${server.base}fhir/R4/Binary/${binaryId}${RAW ? '' : '?_format=json'}`, {
            headers: { authorization: `Bearer ${a}` },
          });
          let bytes = 0;
          for await (const chunk of res.body ?? []) bytes += (chunk as Uint8Array).length;
          big.push({ status: res.status, ms: performance.now() - started, mb: bytes / 1048576 });
        }),
      );
    }
    const seconds = (performance.now() - t0) / 1000;
    done = true;
    const busy = await during;
    const statuses: Record<number, number> = {};
    for (const r of big) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    const ok = big.filter((r) => r.status === 200);
    console.log(
      `\n${MAIN}: ${READERS} clients at once read a ${MB} MiB Binary ${RAW ? 'raw' : 'as FHIR JSON'}, ${ROUNDS} rounds, on ${EMBEDDED ? 'the embedded PostgreSQL' : 'PostgreSQL'}`,
    );
    console.table({ 'B idle': summary(idle), 'B during the large reads': summary(busy) });
    console.table({
      'large reads': {
        answers: JSON.stringify(statuses),
        'MB each': ok[0] ? Number(ok[0].mb.toFixed(1)) : 0,
        'median s': Number(
          (
            quantile(
              ok.map((r) => r.ms),
              0.5,
            ) / 1000
          ).toFixed(1),
        ),
        'max s': Number((Math.max(...big.map((r) => r.ms)) / 1000).toFixed(1)),
        'all s': Number(seconds.toFixed(1)),
        'server peak RSS MB (before)': rssBefore,
        'server peak RSS MB': server.peakRssMb(),
      },
    });
  } finally {
    await server.stop();
    fs.rmSync(work, { recursive: true, force: true });
    if (!EMBEDDED) await dropDatabase(DB);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
