// CSV on PostgreSQL (issue 5): the synchronous `$csv` of 1000 Patients with autocannon (2 connections; targets p50
// ≤ 50 ms and ≥ 20 exports/s), and the CSV bulk export (`$export?_outputFormat=text/csv`) of every Patient in the
// database (100,000 after bench/export.ts, filled up here when missing): rows/s from kick-off to `completed`
// (target ≥ 20,000).
import autocannon from 'autocannon';
import { EXPORT_PATIENTS, ensurePatients, timedExport } from './export.js';
import type { RunningServer } from './server.js';

export const CSV_FIELDS = 'id,name,address,telecom,birthDate,gender';

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

export interface CsvRequestFigures {
  reqPerSec: number;
  p50: number;
  p99: number;
  errors: number;
}

/** `GET Patient/$csv?_fields=...`: 1000 rows (the oldest Patients), medians of `runs` autocannon runs. */
export async function benchCsvRequests(
  server: RunningServer,
  token: string,
  runs: number,
  duration: number,
): Promise<CsvRequestFigures> {
  const url = `${server.base}fhir/R4/Patient/$csv?_fields=${encodeURIComponent(CSV_FIELDS)}`;
  const check = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  const rows = (await check.text()).split('\r\n').length - 2;
  if (check.status !== 200 || rows !== 1000)
    throw new Error(`$csv answered ${check.status} with ${rows} rows`);
  const results = [];
  for (let i = 0; i < runs; i++)
    results.push(
      await autocannon({ url, connections: 2, duration, headers: { authorization: `Bearer ${token}` } }),
    );
  return {
    reqPerSec: Math.round(median(results.map((r) => r.requests.average)) * 10) / 10,
    p50: median(results.map((r) => r.latency.p50)),
    p99: median(results.map((r) => r.latency.p99)),
    errors: results.reduce((n, r) => n + r.non2xx + r.errors, 0),
  };
}

/** CSV bulk export of every Patient: rows/s, median of `runs`. */
export async function benchCsvExport(
  server: RunningServer,
  token: string,
  runs: number,
  notes: string[],
): Promise<void> {
  await ensurePatients(server.base, token, EXPORT_PATIENTS);
  const query = `_type=Patient&_outputFormat=text/csv&_fields=${encodeURIComponent(CSV_FIELDS)}`;
  const done = [];
  // timedExport counts lines; a CSV file has one more (its header row).
  for (let i = 0; i < runs; i++) {
    const run = await timedExport(server, token, query);
    done.push({ ...run, rows: run.resources - run.output.length });
  }
  const rates = done.map((e) => e.rows / e.seconds);
  notes.push(
    `postgres: CSV $export (_fields=${CSV_FIELDS}) of ${done[0]?.rows} Patients: median ${Math.round(median(rates))} rows/s ` +
      `(${done.map((e) => e.seconds.toFixed(2)).join(', ')} s), peak server RSS ${Math.max(...done.map((e) => e.peakRssMb))} MB`,
  );
}
