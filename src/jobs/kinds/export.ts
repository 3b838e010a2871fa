// Bulk Data export job (https://hl7.org/fhir/uv/bulkdata/export.html, API.md §5): streams stored JSON text
// (`content::text`) page by page in rid order into one file per type, so memory stays flat. NDJSON files hold the
// stored text as it is (never parsed); a CSV export (`_outputFormat=text/csv`, one type) writes the rows of $csv
// (src/fhir/csv/table.ts) after a BOM and header row. The checkpoint holds the position and each file's size; a
// resumed job cuts its files back to those sizes.
// The patient compartment is approximated by references: Patient resources, and resources with a reference to a
// Patient (to one of the Group's Patients for Group/<id>/$export).
import type { Queryable } from '../../storage/db.js';
import { createFhirpathPool, type FhirpathPool } from '../../fhir/csv/fhirpath-pool.js';
import { csvTable, type CellFailure } from '../../fhir/csv/table.js';
import { contentJson } from '../../fhir/search/sql.js';
import type { Resource } from '../../fhir/types.js';
import type { JobEnv, JobKind, StepResult } from '../kind.js';
import type { JobRow } from '../queue.js';

export interface ExportParams {
  level: 'system' | 'patient' | 'group';
  types: string[];
  /** ISO instant: only resources with a later meta.lastUpdated. */
  since: string | null;
  /** The caller's scope: one project, or null for every project (super administrators). */
  projectId: string | null;
  /** Group level: ids of the Group's Patient members. */
  patients?: string[];
  /** Absent: NDJSON. `csv`: one type, columns from `fields` (the `_fields` text of $csv). */
  format?: 'csv';
  fields?: string;
}

interface FileState {
  type: string;
  size: number;
  count: number;
}

interface ExportState {
  ti: number;
  after: number;
  files: FileState[];
  total: number;
  /** CSV: a FHIRPath failure was logged already (once per job). */
  logged?: boolean;
}

/** The file store key of the directory holding every output file of a job. */
export const exportDirKey = (jobId: string): string => `exports/${jobId}`;
/** The file store key of an output file (`Patient.ndjson`, `Patient.csv`). */
export const exportFileKey = (jobId: string, file: string): string => `${exportDirKey(jobId)}/${file}`;

/** How rows become file text. */
interface FileFormat {
  ext: 'ndjson' | 'csv';
  /** Written when a type's file begins (CSV: BOM and header row), so that a type without rows has a file too. */
  head?: string;
  /** CSV: top-level properties left in storage (see SearchRequest.omit). */
  omit?: readonly string[];
  text(rows: readonly { json: string }[]): Promise<string>;
  failures(): { count: number; first: CellFailure } | undefined;
}

const NDJSON: FileFormat = {
  ext: 'ndjson',
  text: async (rows) => rows.map((r) => r.json).join('\n') + '\n',
  failures: () => undefined,
};

/** CSV: FHIRPath beyond the fast path runs in the worker pool; a page beyond its time limit fails the job. */
async function fileFormat(p: ExportParams, fhirpath: () => FhirpathPool): Promise<FileFormat> {
  if (p.format !== 'csv') return NDJSON;
  const table = await csvTable(p.types[0] as string, p.fields ?? '', fhirpath());
  return {
    ext: 'csv',
    head: table.head,
    ...(table.omit ? { omit: table.omit } : {}),
    text: (rows) => table.rows(rows.map((r) => r.json)),
    failures: table.failures,
  };
}

const extOf = (p: ExportParams): string => (p.format === 'csv' ? 'csv' : 'ndjson');
const fileKey = (job: JobRow, type: string): string =>
  exportFileKey(job.id, `${type}.${extOf(job.params as unknown as ExportParams)}`);

function pageQuery(
  p: ExportParams,
  type: string,
  after: number,
  limit: number,
  omit: readonly string[] | undefined,
): { text: string; values: unknown[] } {
  const values: unknown[] = [type, after, limit];
  const conds = ['r.resource_type = $1', 'NOT r.deleted', 'r.rid > $2'];
  if (p.projectId !== null) conds.push(`r.project_id = $${values.push(p.projectId)}`);
  if (p.since !== null) conds.push(`r.last_updated > $${values.push(p.since)}::timestamptz`);
  if (p.level === 'group') {
    const ids = `$${values.push(p.patients ?? [])}::text[]`;
    conds.push(
      type === 'Patient'
        ? `r.id = ANY(${ids})`
        : `EXISTS (SELECT 1 FROM sp_reference s WHERE s.rid = r.rid AND s.target_type = 'Patient' AND s.target_id = ANY(${ids}))`,
    );
  } else if (p.level === 'patient' && type !== 'Patient') {
    conds.push(`EXISTS (SELECT 1 FROM sp_reference s WHERE s.rid = r.rid AND s.target_type = 'Patient')`);
  }
  return {
    text: `SELECT r.rid, ${contentJson('r', omit, (v) => `$${values.push(v)}`)} AS json FROM resources r WHERE ${conds.join(' AND ')} ORDER BY r.rid LIMIT $3`,
    values,
  };
}

async function page(
  db: Queryable,
  p: ExportParams,
  type: string,
  after: number,
  limit: number,
  omit?: readonly string[],
) {
  const q = pageQuery(p, type, after, limit, omit);
  return (await db.query<{ rid: number; json: string }>(q.text, q.values)).rows;
}

function output(env: JobEnv, job: JobRow, s: ExportState): Resource {
  const ext = extOf(job.params as unknown as ExportParams);
  return {
    resourceType: 'Parameters',
    parameter: s.files.map((f) => ({
      name: 'output',
      part: [
        { name: 'type', valueCode: f.type },
        { name: 'url', valueUri: `${env.fhirBase}/AsyncJob/${job.id}/output/${f.type}.${ext}` },
      ],
    })),
  };
}

export interface ExportKindOptions {
  /** Rows per query. */
  pageSize?: number;
  /** A step (the work between two checkpoints) ends after this long, or after `pagesPerStep` pages. */
  stepMs?: number;
  pagesPerStep?: number;
  /** Told once per CSV job when a FHIRPath failed on some resources (their cells are empty). */
  log?: { warn(obj: unknown, msg: string): void };
  /** The FHIRPath worker pool of CSV exports (main shares the app's); default: one of the kind's own, 10 s limit. */
  fhirpath?: FhirpathPool;
}

export function exportKind(opts: ExportKindOptions = {}): JobKind<ExportState> {
  const pageSize = opts.pageSize ?? 2000;
  const stepMs = opts.stepMs ?? 250;
  const pagesPerStep = opts.pagesPerStep ?? 10;
  let ownPool: FhirpathPool | undefined;
  const fhirpath = (): FhirpathPool =>
    opts.fhirpath ?? (ownPool ??= createFhirpathPool({ timeoutMs: 10_000 }));
  return {
    async start(env, job) {
      // A worker that died before its first checkpoint may have left a partial file.
      await env.files.deleteDir(exportDirKey(job.id));
      return { ti: 0, after: 0, files: [], total: 0 };
    },
    async resume(env, job, s) {
      for (const f of s.files) await env.files.truncate(fileKey(job, f.type), f.size);
      const current = (job.params as unknown as ExportParams).types[s.ti];
      if (current && !s.files.some((f) => f.type === current))
        await env.files.truncate(fileKey(job, current), 0);
    },
    // One step: pages in rid order, each next page read from the database while the current one is written.
    async runStep(env, job, prev): Promise<StepResult<ExportState>> {
      const p = job.params as unknown as ExportParams;
      const s: ExportState = { ...prev, files: prev.files.map((f) => ({ ...f })) };
      const format = await fileFormat(p, fhirpath);
      const until = Date.now() + stepMs;
      const read = (): Promise<{ rid: number; json: string }[]> =>
        page(env.db, p, p.types[s.ti] as string, s.after, pageSize, format.omit);
      let pending = s.ti < p.types.length ? read() : undefined;
      for (let pages = 1; pending; pages++) {
        const type = p.types[s.ti] as string;
        const rows = await pending;
        if (rows.length > 0) s.after = Number((rows[rows.length - 1] as { rid: number }).rid);
        if (rows.length < pageSize) {
          s.ti++;
          s.after = 0;
        }
        pending = s.ti < p.types.length && pages < pagesPerStep && Date.now() < until ? read() : undefined;
        let f = s.files.find((x) => x.type === type);
        const head = !f && format.head !== undefined ? format.head : '';
        const text = head + (rows.length > 0 ? await format.text(rows) : '');
        if (text !== '') {
          const size = await env.files.append(fileKey(job, type), text);
          if (!f) s.files.push((f = { type, size: 0, count: 0 }));
          f.size = size;
          f.count += rows.length;
          s.total += rows.length;
        }
      }
      const failures = format.failures();
      if (failures && !s.logged) {
        opts.log?.warn(
          { job: job.id, failures },
          'CSV export: a FHIRPath failed on some resources; their cells are empty',
        );
        s.logged = true;
      }
      const done = s.ti >= p.types.length;
      return {
        state: s,
        done,
        progress: `Exported ${s.total} resources (${Math.min(s.ti, p.types.length)} of ${p.types.length} types)`,
        ...(done ? { output: output(env, job, s) } : {}),
      };
    },
    async cancel(env, job) {
      await env.files.deleteDir(exportDirKey(job.id));
    },
  };
}
