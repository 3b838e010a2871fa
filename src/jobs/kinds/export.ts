// Bulk Data export job (https://hl7.org/fhir/uv/bulkdata/export.html, API.md §5): streams stored JSON text
// (`content::text`) page by page in rid order (the query: export-query.ts) into files per type, so memory stays
// flat. A type's file is split at `fileResources` resources (`Patient.ndjson`, `Patient.2.ndjson`, ...). NDJSON files
// hold the stored text as it is (never parsed), except under `_elements`; a CSV export (`_outputFormat=text/csv`, one
// type) writes the rows of $csv (src/fhir/csv/table.ts), each file after a BOM and header row. Problems that do not
// fail the job (ignored kick-off parameters, FHIRPath failures of CSV cells, a resource that could not be written) are
// OperationOutcomes in `errors.ndjson`, published as the output's `error`. The checkpoint holds the position and each
// file's size; a resumed job cuts its files back to those sizes and empties any file begun after the checkpoint.
import type { Queryable } from '../../storage/db.js';
import { createFhirpathPool, type FhirpathPool } from '../../fhir/csv/fhirpath-pool.js';
import type { ElementsParam } from '../../fhir/operations/export-params.js';
import { outcome, type OperationOutcome } from '../../fhir/outcome.js';
import type { Resource } from '../../fhir/types.js';
import type { JobEnv, JobKind, StepResult } from '../kind.js';
import type { JobRow } from '../queue.js';
import { fileFormat, type FileFormat, type Row } from './export-format.js';
import { pageQuery } from './export-query.js';

export interface ExportParams {
  level: 'system' | 'patient' | 'group';
  types: string[];
  /** ISO instant: only resources with a later meta.lastUpdated. */
  since: string | null;
  /** The caller's scope: one project, or null for every project (super administrators). */
  projectId: string | null;
  /** Patient and Group level: only these Patients' compartments (the Group's current members, or `patient`). */
  patients?: string[];
  /** Absent: NDJSON. `csv`: one type, columns from `fields` (the `_fields` text of $csv). */
  format?: 'csv';
  fields?: string;
  /** `_typeFilter`: per type, search queries (the text after `?`), OR'ed. */
  typeFilters?: Record<string, string[]>;
  /** `_elements`. */
  elements?: ElementsParam;
  /** Ignored kick-off parameters, written to the error file. */
  warnings?: string[];
}

interface FileState {
  type: string;
  /** The file name; absent in checkpoints written before files were split: `<type>.<ext>`. */
  name: string;
  size: number;
  count: number;
}

interface ExportState {
  ti: number;
  after: number;
  files: FileState[];
  total: number;
  /** errors.ndjson (absent in checkpoints written before it existed: empty). */
  errors?: { size: number; count: number };
  /** CSV: a FHIRPath failure was logged already (once per job). */
  logged?: boolean;
  /**
   * The primary's WAL position when the job started (with read replicas): its pages are read from a replica only once
   * that has replayed it, so an export sees everything written before it began. Absent: pages from the primary.
   */
  lsn?: string;
}

/** The error file: OperationOutcomes, one a line. */
export const ERROR_FILE = 'errors.ndjson';

/** The file store key of the directory holding every output file of a job. */
export const exportDirKey = (jobId: string): string => `exports/${jobId}`;
/** The file store key of an output file (`Patient.ndjson`, `Patient.2.ndjson`, `Patient.csv`, `errors.ndjson`). */
export const exportFileKey = (jobId: string, file: string): string => `${exportDirKey(jobId)}/${file}`;

/** The n-th (1-based) file of a type: `Patient.ndjson`, `Patient.2.ndjson`, ... */
const fileName = (type: string, n: number, ext: string): string =>
  n === 1 ? `${type}.${ext}` : `${type}.${n}.${ext}`;

const extOf = (p: ExportParams): string => (p.format === 'csv' ? 'csv' : 'ndjson');
const paramsOf = (job: JobRow): ExportParams => job.params as unknown as ExportParams;

async function page(
  db: Queryable,
  p: ExportParams,
  type: string,
  after: number,
  limit: number,
  omit?: readonly string[],
): Promise<Row[]> {
  const q = pageQuery(p, type, after, limit, omit);
  return (await db.query<Row>(q.text, q.values)).rows;
}

/** A copy of a checkpointed state, in the current form. */
function current(job: JobRow, s: ExportState): ExportState & { errors: { size: number; count: number } } {
  const ext = extOf(paramsOf(job));
  return {
    ...s,
    files: s.files.map((f) => ({ ...f, name: f.name ?? `${f.type}.${ext}` })),
    errors: { ...(s.errors ?? { size: 0, count: 0 }) },
  };
}

/** Appends OperationOutcomes to the error file. */
async function addErrors(env: JobEnv, job: JobRow, s: ExportState, lines: OperationOutcome[]): Promise<void> {
  if (lines.length === 0) return;
  const text = lines.map((o) => JSON.stringify(o)).join('\n') + '\n';
  const size = await env.files.append(exportFileKey(job.id, ERROR_FILE), text);
  s.errors = { size, count: (s.errors?.count ?? 0) + lines.length };
}

function output(env: JobEnv, job: JobRow, s: ExportState): Resource {
  const url = (file: string): string => `${env.fhirBase}/AsyncJob/${job.id}/output/${file}`;
  const parameter = s.files.map((f) => ({
    name: 'output',
    part: [
      { name: 'type', valueCode: f.type },
      { name: 'url', valueUri: url(f.name) },
      { name: 'count', valueInteger: f.count },
    ],
  }));
  if (s.errors && s.errors.count > 0)
    parameter.push({
      name: 'error',
      part: [
        { name: 'type', valueCode: 'OperationOutcome' },
        { name: 'url', valueUri: url(ERROR_FILE) },
        { name: 'count', valueInteger: s.errors.count },
      ],
    });
  // An export that found nothing has no files: a Parameters without parameters (FHIR allows no empty arrays).
  return { resourceType: 'Parameters', ...(parameter.length > 0 ? { parameter } : {}) };
}

export interface ExportKindOptions {
  /** Rows per query. */
  pageSize?: number;
  /** Resources per file (API.md §1 `exportFileResources`); a type's file is split when it holds this many. */
  fileResources?: number;
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
  const fileResources = Math.max(1, opts.fileResources ?? 100_000);
  const stepMs = opts.stepMs ?? 250;
  const pagesPerStep = opts.pagesPerStep ?? 10;
  let ownPool: FhirpathPool | undefined;
  const fhirpath = (): FhirpathPool =>
    opts.fhirpath ?? (ownPool ??= createFhirpathPool({ timeoutMs: 10_000 }));

  /** Writes `rows` of `type` to its last file, beginning the next file whenever one is full. */
  async function write(
    env: JobEnv,
    job: JobRow,
    s: ExportState,
    format: FileFormat,
    type: string,
    rows: Row[],
  ) {
    if (rows.length === 0 && (format.head === undefined || s.files.some((f) => f.type === type))) return;
    const errors: OperationOutcome[] = [];
    let done = 0;
    do {
      const mine = s.files.filter((f) => f.type === type);
      const last = mine[mine.length - 1];
      const fresh = !last || last.count >= fileResources;
      const chunk = rows.slice(done, done + fileResources - (fresh ? 0 : last.count));
      const before = errors.length;
      const head = fresh && format.head ? Buffer.from(format.head, 'utf8') : undefined;
      const body = chunk.length > 0 ? await format.text(type, chunk, (o) => errors.push(o)) : undefined;
      const text = head && body ? Buffer.concat([head, body]) : (head ?? body);
      done += chunk.length;
      // A file is begun (and listed) only with something in it.
      if (!text || text.length === 0) continue;
      const f = fresh ? { type, name: fileName(type, mine.length + 1, format.ext), size: 0, count: 0 } : last;
      if (fresh) s.files.push(f);
      f.size = await env.files.append(exportFileKey(job.id, f.name), text);
      const written = chunk.length - (errors.length - before);
      f.count += written;
      s.total += written;
      env.wrote?.('export', written);
    } while (done < rows.length);
    await addErrors(env, job, s, errors);
  }

  return {
    async start(env, job) {
      // A worker that died before its first checkpoint may have left partial files.
      await env.files.deleteDir(exportDirKey(job.id));
      const lsn = env.reads?.enabled ? await env.reads.primaryLsn() : undefined;
      const s: ExportState = {
        ti: 0,
        after: 0,
        files: [],
        total: 0,
        errors: { size: 0, count: 0 },
        ...(lsn ? { lsn } : {}),
      };
      const warnings = paramsOf(job).warnings ?? [];
      await addErrors(
        env,
        job,
        s,
        warnings.map((w) => outcome('warning', 'not-supported', w)),
      );
      return s;
    },
    async resume(env, job, saved) {
      const s = current(job, saved);
      for (const f of s.files) await env.files.truncate(exportFileKey(job.id, f.name), f.size);
      await env.files.truncate(exportFileKey(job.id, ERROR_FILE), s.errors.size);
      // Files begun after the checkpoint: the current type's next ones and every later type's. Each is emptied, so
      // that writing it again starts from nothing.
      const p = paramsOf(job);
      for (const type of p.types.slice(s.ti)) {
        for (let n = s.files.filter((f) => f.type === type).length + 1; ; n++) {
          const key = exportFileKey(job.id, fileName(type, n, extOf(p)));
          const stream = await env.files.read(key);
          if (!stream) break;
          stream.destroy();
          await env.files.truncate(key, 0);
        }
      }
    },
    // One step: pages in rid order, each next page read from the database while the current one is written.
    async runStep(env, job, prev): Promise<StepResult<ExportState>> {
      const p = paramsOf(job);
      const s = current(job, prev);
      const format = await fileFormat(p, fhirpath);
      const until = Date.now() + stepMs;
      const db = env.reads && s.lsn ? env.reads.reader({ after: s.lsn }) : env.db;
      const read = (): Promise<Row[]> => page(db, p, p.types[s.ti] as string, s.after, pageSize, format.omit);
      let pending = s.ti < p.types.length ? read() : undefined;
      for (let pages = 1; pending; pages++) {
        const type = p.types[s.ti] as string;
        const rows = await pending;
        if (rows.length > 0) s.after = Number((rows[rows.length - 1] as Row).rid);
        if (rows.length < pageSize) {
          s.ti++;
          s.after = 0;
        }
        pending = s.ti < p.types.length && pages < pagesPerStep && Date.now() < until ? read() : undefined;
        await write(env, job, s, format, type, rows);
      }
      const failures = format.failures();
      if (failures) {
        const { count, first } = failures;
        await addErrors(env, job, s, [
          outcome(
            'warning',
            'processing',
            `A FHIRPath failed on ${count} resource(s) of this part of the export; their cells are empty. ` +
              `First: ${first.entry} on ${first.resource}: ${first.message}`,
          ),
        ]);
        if (!s.logged) {
          opts.log?.warn(
            { job: job.id, failures },
            'CSV export: a FHIRPath failed on some resources; their cells are empty',
          );
          s.logged = true;
        }
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
