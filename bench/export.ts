// Bulk $export on PostgreSQL (issue 4): the server holds at least BENCH_EXPORT_PATIENTS Patients (100,000 by
// default; loaded in batch Bundles when missing), then `$export?_type=Patient` is timed from kick-off to `completed`
// (resources/s), the server's RSS is sampled every 100 ms during the export (peak and before), and a second export
// is cancelled mid-way to time cancel-to-stop: from sending `$cancel` to the worker having stopped and deleted its
// partial file (the queue row's `cancel_requested` cleared, read from PostgreSQL). Last, the export's file is
// downloaded by DOWNLOADERS clients at once: MB/s in all, and the server's peak RSS meanwhile.
import fs from 'node:fs';
import pg from 'pg';
import { makePatient } from './patients.js';
import type { RunningServer } from './server.js';

export const EXPORT_PATIENTS = Number(process.env.BENCH_EXPORT_PATIENTS ?? 100_000);
const DOWNLOADERS = 4;

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024);
}

async function patientCount(base: string, token: string): Promise<number> {
  const res = await fetch(`${base}fhir/R4/Patient?_summary=count`, {
    headers: { authorization: `Bearer ${token}` },
  });
  return ((await res.json()) as { total: number }).total;
}

/** Adds Patients (batch Bundles of 500, 4 concurrent clients) until the server holds at least `n`. */
export async function ensurePatients(base: string, token: string, n: number): Promise<number> {
  const have = await patientCount(base, token);
  const starts: number[] = [];
  for (let i = have; i < n; i += 500) starts.push(i);
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < starts.length) {
        const from = starts[next++] as number;
        const entry = Array.from({ length: Math.min(500, n - from) }, (_, k) => ({
          resource: makePatient(1_000_000 + from + k),
          request: { method: 'POST', url: 'Patient' },
        }));
        const res = await fetch(`${base}fhir/R4`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
          body: JSON.stringify({ resourceType: 'Bundle', type: 'batch', entry }),
        });
        if (!res.ok) throw new Error(`batch failed ${res.status}`);
        await res.arrayBuffer();
      }
    }),
  );
  return patientCount(base, token);
}

async function kickOff(base: string, token: string, query: string): Promise<string> {
  const res = await fetch(`${base}fhir/R4/$export?${query}`, {
    headers: { authorization: `Bearer ${token}`, prefer: 'respond-async' },
  });
  if (res.status !== 202) throw new Error(`export kick-off failed ${res.status} ${await res.text()}`);
  return res.headers.get('content-location') as string;
}

interface ExportRun {
  seconds: number;
  resources: number;
  peakRssMb: number;
}

/**
 * One export, timed from kick-off to `completed`, with RSS sampled meanwhile: `$export?<query>`, or another
 * kick-off (`start` answers the status URL).
 */
export async function timedExport(
  server: RunningServer,
  token: string,
  query: string | (() => Promise<string>),
): Promise<ExportRun & { output: { type: string; url: string }[] }> {
  const auth = { authorization: `Bearer ${token}` };
  let peak = rssMb(server.pid);
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(server.pid))), 100);
  const started = performance.now();
  try {
    const status = typeof query === 'string' ? await kickOff(server.base, token, query) : await query();
    for (;;) {
      const res = await fetch(status, { headers: auth });
      if (res.status === 200) {
        const job = (await res.json()) as {
          status: string;
          output?: { parameter: { part: { name: string; valueCode?: string; valueUri?: string }[] }[] };
        };
        if (job.status !== 'completed') throw new Error(`export ended ${job.status}`);
        const seconds = (performance.now() - started) / 1000;
        const output = (job.output?.parameter ?? []).map((p) => ({
          type: p.part.find((x) => x.name === 'type')?.valueCode as string,
          url: p.part.find((x) => x.name === 'url')?.valueUri as string,
        }));
        let resources = 0;
        for (const o of output) {
          const text = await (await fetch(o.url, { headers: auth })).text();
          for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) resources++;
        }
        return { seconds, resources, peakRssMb: peak, output };
      }
      await res.arrayBuffer();
      await sleep(20);
    }
  } finally {
    clearInterval(sampler);
  }
}

/** `urls` downloaded by DOWNLOADERS clients at once (each reads every file, discarding it as it comes). */
export async function concurrentDownloads(
  server: RunningServer,
  token: string,
  urls: string[],
): Promise<{ mb: number; seconds: number; peakRssMb: number }> {
  let peak = rssMb(server.pid);
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(server.pid))), 100);
  const started = performance.now();
  let bytes = 0;
  try {
    await Promise.all(
      Array.from({ length: DOWNLOADERS }, async () => {
        for (const url of urls) {
          const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
          if (res.status !== 200 || !res.body) throw new Error(`download answered ${res.status}`);
          for await (const chunk of res.body) bytes += (chunk as Uint8Array).length;
        }
      }),
    );
  } finally {
    clearInterval(sampler);
  }
  return { mb: bytes / 1048576, seconds: (performance.now() - started) / 1000, peakRssMb: peak };
}

/** Milliseconds from sending `$cancel` on a running export to its worker having stopped and cleaned up. */
async function cancelToStop(server: RunningServer, token: string, pgUrl: string): Promise<number> {
  const auth = { authorization: `Bearer ${token}` };
  const status = await kickOff(server.base, token, '_type=Patient');
  const id = status.split('/').pop() as string;
  for (;;) {
    const res = await fetch(status, { headers: auth });
    const progress = res.headers.get('x-progress') ?? '';
    await res.arrayBuffer();
    if (res.status !== 202) throw new Error('the export ended before it could be cancelled');
    if (/Exported [1-9]/.test(progress)) break;
    await sleep(5);
  }
  const client = new pg.Client({ connectionString: pgUrl });
  await client.connect();
  try {
    const sent = performance.now();
    const res = await fetch(`${status}/$cancel`, { method: 'POST', headers: auth });
    if (res.status !== 200) throw new Error(`$cancel answered ${res.status}`);
    for (;;) {
      const row = await client.query<{ state: string; cancel_requested: boolean }>(
        'SELECT state, cancel_requested FROM jobs WHERE id = $1',
        [id],
      );
      if (row.rows[0]?.state === 'cancelled' && !row.rows[0].cancel_requested) break;
      if (performance.now() - sent > 30_000) throw new Error('the worker did not stop');
      await sleep(2);
    }
    return performance.now() - sent;
  } finally {
    await client.end();
  }
}

export async function benchExport(
  server: RunningServer,
  token: string,
  pgUrl: string,
  runs: number,
  notes: string[],
): Promise<void> {
  const loadStarted = performance.now();
  const patients = await ensurePatients(server.base, token, EXPORT_PATIENTS);
  notes.push(
    `postgres: ${patients} Patients in the database for the export runs (filled up in ${((performance.now() - loadStarted) / 1000).toFixed(0)} s)`,
  );
  const before = rssMb(server.pid);
  const exports: (ExportRun & { output: { url: string }[] })[] = [];
  for (let i = 0; i < runs; i++) exports.push(await timedExport(server, token, '_type=Patient'));
  const rates = exports.map((e) => e.resources / e.seconds);
  notes.push(
    `postgres: $export of ${exports[0]?.resources} Patients: median ${Math.round(median(rates))} resources/s ` +
      `(${exports.map((e) => e.seconds.toFixed(2)).join(', ')} s), server RSS ${before} MB before, ` +
      `peak during export ${Math.max(...exports.map((e) => e.peakRssMb))} MB`,
  );
  const downloads = [];
  const urls = exports[0]?.output.map((o) => o.url) ?? [];
  for (let i = 0; i < runs; i++) downloads.push(await concurrentDownloads(server, token, urls));
  notes.push(
    `postgres: the export's files downloaded by ${DOWNLOADERS} clients at once (${Math.round(downloads[0]?.mb ?? 0)} MB in all): ` +
      `median ${Math.round(median(downloads.map((d) => d.mb / d.seconds)))} MB/s, server RSS peak ${Math.max(...downloads.map((d) => d.peakRssMb))} MB`,
  );
  const cancels: number[] = [];
  for (let i = 0; i < runs; i++) cancels.push(await cancelToStop(server, token, pgUrl));
  notes.push(
    `postgres: $export cancel-to-stop median ${Math.round(median(cancels))} ms (${cancels.map((c) => Math.round(c)).join(', ')} ms)`,
  );
}
