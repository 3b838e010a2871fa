// Big outputs of SQL on FHIR views beside other reads (issue 25 point 7), on PostgreSQL, for each build of
// BIG_TARGETS in turn (default `this=dist/main.js`; e.g. `base=/tmp/base/dist/main.js,this=dist/main.js`):
//   1. the Parquet `$viewdefinition-export` of 9 sibling `forEach: 'name'` over BIG_PATIENTS Patients of two names
//      (2,000 by default: 1,024,000 rows of 10 columns), timed from kick-off to its end;
//   2. `$viewdefinition-run` of 50 `unionAll` branches beside a `forEach` (status and time).
// Meanwhile one client reads a Patient by id again and again; the table gives the median and the maximum latency of
// those reads, and the server's peak RSS (VmHWM) during each. The database is dropped at the end.
//
//   npm run build && npx tsx bench/big-outputs.ts
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dropDatabase, freshDatabase, login, startServer, type RunningServer } from './server.js';

const TARGETS = (process.env.BIG_TARGETS ?? 'this=dist/main.js').split(',').map((t) => t.split('='));
const PATIENTS = Number(process.env.BIG_PATIENTS ?? 2000);
const DB = 'cinder_big_outputs';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const crossed = {
  resourceType: 'ViewDefinition',
  name: 'crossed',
  resource: 'Patient',
  select: [
    { column: [{ name: 'id', path: 'getResourceKey()' }] },
    ...Array.from({ length: 9 }, (_, i) => ({
      forEach: 'name',
      column: [{ name: `c${i}`, path: 'family' }],
    })),
  ],
};
const unions = {
  resourceType: 'ViewDefinition',
  resource: 'Patient',
  select: [
    { forEach: 'name', column: [{ name: 'f', path: 'family' }] },
    {
      unionAll: Array.from({ length: 50 }, () => ({
        forEach: 'name.given',
        column: [{ name: 'g', path: '$this' }],
      })),
    },
    { forEach: 'name', column: [{ name: 'h', path: 'family' }] },
  ],
};

async function fhir(
  base: string,
  token: string,
  method: string,
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${base}fhir/R4/${url}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body ? { 'content-type': 'application/fhir+json' } : {}),
      ...headers,
    },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
}

async function load(base: string, token: string): Promise<string> {
  const have = (await (await fhir(base, token, 'GET', 'Patient?_summary=count')).json()) as { total: number };
  for (let i = have.total; i < PATIENTS; i += 100) {
    const entry = Array.from({ length: Math.min(100, PATIENTS - i) }, (_, j) => ({
      request: { method: 'POST', url: 'Patient' },
      resource: {
        resourceType: 'Patient',
        name: [
          { family: `Big${i + j}`, given: ['Ann', 'Marie'] },
          { family: `Other${i + j}`, given: ['Nan'] },
        ],
      },
    }));
    const res = await fhir(base, token, 'POST', '', { resourceType: 'Bundle', type: 'batch', entry });
    if (!res.ok) throw new Error(`load answered ${res.status}`);
    await res.arrayBuffer();
  }
  const one = (await (await fhir(base, token, 'GET', 'Patient?_count=1')).json()) as {
    entry: { resource: { id: string } }[];
  };
  return one.entry[0]?.resource.id as string;
}

/** Reads Patient/<id> one after another while `work` runs; its latencies (ms) and the server's peak RSS. */
async function beside<T>(
  server: RunningServer,
  token: string,
  id: string,
  work: () => Promise<T>,
): Promise<{ result: T; median: number; max: number; reads: number; peakRssMb: number }> {
  let done = false;
  const latencies: number[] = [];
  const reader = (async () => {
    while (!done) {
      const t0 = performance.now();
      const res = await fhir(server.base, token, 'GET', `Patient/${id}`);
      await res.arrayBuffer();
      latencies.push(performance.now() - t0);
      await sleep(50);
    }
  })();
  try {
    const result = await work();
    return { result, ...stats(latencies), peakRssMb: server.peakRssMb() };
  } finally {
    done = true;
    await reader;
  }
}

function stats(xs: number[]): { median: number; max: number; reads: number } {
  const s = [...xs].sort((a, b) => a - b);
  return {
    median: Math.round(s[Math.floor(s.length / 2)] ?? 0),
    max: Math.round(s[s.length - 1] ?? 0),
    reads: s.length,
  };
}

async function exportParquet(base: string, token: string): Promise<string> {
  const t0 = performance.now();
  const res = await fhir(
    base,
    token,
    'POST',
    '$viewdefinition-export',
    {
      resourceType: 'Parameters',
      parameter: [
        { name: 'view', part: [{ name: 'viewResource', resource: crossed }] },
        { name: '_format', valueCode: 'parquet' },
      ],
    },
    { prefer: 'respond-async' },
  );
  if (res.status !== 202) throw new Error(`export answered ${res.status}: ${await res.text()}`);
  const status = String(res.headers.get('content-location')).replace(/^.*\/fhir\/R4\//, '');
  await res.arrayBuffer();
  for (;;) {
    if (performance.now() - t0 > 300_000) return 'still running after 300 s';
    const s = await fhir(base, token, 'GET', status, undefined, { accept: 'application/json' });
    const text = await s.text();
    if (s.status !== 202)
      return `${s.status} in ${((performance.now() - t0) / 1000).toFixed(1)} s${s.status === 200 ? '' : `: ${text.slice(0, 160)}`}`;
    await sleep(250);
  }
}

async function runUnions(base: string, token: string): Promise<string> {
  const t0 = performance.now();
  const res = await fhir(base, token, 'POST', '$viewdefinition-run', {
    resourceType: 'Parameters',
    parameter: [{ name: 'viewResource', resource: unions }],
  });
  const text = await res.text();
  return `${res.status} in ${((performance.now() - t0) / 1000).toFixed(1)} s${res.status === 200 ? ` (${text.length} bytes)` : `: ${text.slice(0, 160)}`}`;
}

async function main(): Promise<void> {
  const url = await freshDatabase(DB);
  const rows: Record<string, string | number>[] = [];
  try {
    for (const [name, main] of TARGETS) {
      for (const [what, work] of [
        ['Parquet export, 9 sibling forEach', exportParquet],
        ['run, 50 unionAll beside forEach', runUnions],
      ] as const) {
        // A fresh server for each measure, so that its peak RSS is that measure's.
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-big-outputs-'));
        const server = await startServer(
          { DATABASE_URL: url, DATA_DIR: path.join(dir, 'data') },
          dir,
          {},
          { main: main as string, stdout: fs.openSync('/dev/null', 'w') },
        );
        try {
          const token = await login(server.base);
          const id = await load(server.base, token);
          const idle = server.peakRssMb();
          const r = await beside(server, token, id, () => work(server.base, token));
          rows.push({
            build: name as string,
            request: what,
            answer: r.result,
            'reads p50 ms': r.median,
            'reads max ms': r.max,
            reads: r.reads,
            'RSS before MB': idle,
            'peak RSS MB': r.peakRssMb,
          });
        } finally {
          await server.stop();
          fs.rmSync(dir, { recursive: true, force: true });
        }
      }
    }
  } finally {
    await dropDatabase(DB);
  }
  console.log(`\nBig view outputs over ${PATIENTS} Patients of two names, beside reads of one Patient:`);
  console.table(rows);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
