// The `view-export` job ($viewdefinition-export, API.md §7; https://sql-on-fhir.org/ig/operations.html): each view
// run over the caller's stored data of its resource type, page by page in rid order, into one file per view
// (`<name>.ndjson`, `.csv` or `.parquet`), checkpointed after every step so a crash resumes and `$cancel` stops it
// between steps. A view's Parquet file is written at the end of the view from its rows kept meanwhile as NDJSON
// beside it (the checkpointed form a resumed job truncates), read back as a stream and written one row group at a
// time, yielding the event loop between groups (issue 25 point 7: a million rows never sit in memory at once).
// The rows of a page are computed in the FHIRPath worker pool in batches of bounded size (views/batches.ts), and a
// view may write at most `maxCells` cells (config viewExportMaxCells): beyond it the job fails, too-costly, naming it.
// With read replicas the pages are read as a bulk export's are: from a replica that has replayed the primary's WAL
// position recorded when the job started (after its kick-off committed), so the rows hold every write before it.
import { createInterface } from 'node:readline';
import { createFhirpathPool, type FhirpathPool } from '../../fhir/csv/fhirpath-pool.js';
import { FhirError } from '../../fhir/outcome.js';
import { batchSizer, viewRowBatches } from '../../fhir/views/batches.js';
import { csvHeader, csvRow, ndjsonLine, type Row, type ViewColumnInfo } from '../../fhir/views/index.js';
import { writeParquet } from '../../fhir/views/parquet.js';
import type { Resource } from '../../fhir/types.js';
import { storedPage, type ViewData } from '../../fhir/operations/view-source.js';
import type { JobKind, JobEnv, StepResult } from '../kind.js';
import type { JobRow } from '../queue.js';
import { exportDirKey, exportFileKey } from './export.js';

export type ViewExportFormat = 'ndjson' | 'csv' | 'parquet';

export interface ViewExportParams {
  views: { name: string; type: string; view: Record<string, unknown> }[];
  format: ViewExportFormat;
  header: boolean;
  data: ViewData;
}

interface ViewFile {
  name: string;
  type: string;
  /** Bytes written to the file (parquet: to its rows file). */
  size: number;
  count: number;
}

interface ViewExportState {
  vi: number;
  after: number;
  files: ViewFile[];
  total: number;
  /** The primary's WAL position at the start (only with read replicas; absent: every page from the primary). */
  lsn?: string;
}

export interface ViewExportKindOptions {
  pageSize?: number;
  stepMs?: number;
  pagesPerStep?: number;
  /** The FHIRPath worker pool (main shares the app's); default: one of the kind's own, 10 s limit. */
  fhirpath?: FhirpathPool;
  /** Cells (rows × columns) one view may write (config viewExportMaxCells). */
  maxCells?: number;
}

/** Rows of one Parquet row group, and the NDJSON text they may take (whichever comes first). */
const GROUP_ROWS = 10_000;
const GROUP_TEXT = 4 * 1024 * 1024;
/** The default of config viewExportMaxCells. */
export const VIEW_EXPORT_MAX_CELLS = 50_000_000;

const paramsOf = (job: JobRow): ViewExportParams => job.params as unknown as ViewExportParams;
/** The file a view's rows are written to while it runs: the output itself, or the rows of a Parquet file. */
const workFile = (p: ViewExportParams, f: ViewFile): string =>
  p.format === 'parquet' ? `${f.name}.rows.ndjson` : `${f.name}.${p.format}`;
const outputName = (p: ViewExportParams, name: string): string => `${name}.${p.format}`;

function text(p: ViewExportParams, columns: ViewColumnInfo[], rows: Row[]): string {
  if (p.format === 'csv') return rows.map((r) => csvRow(columns, r)).join('');
  return rows.map((r) => ndjsonLine(columns, r)).join('');
}

/** The rows of a stored NDJSON rows file, in groups of at most GROUP_ROWS rows or about GROUP_TEXT of text. */
async function* rowGroups(env: JobEnv, key: string): AsyncGenerator<Row[]> {
  const stream = await env.files.read(key);
  if (!stream) return;
  let group: Row[] = [];
  let text = 0;
  for await (const line of createInterface({ input: stream, crlfDelay: Infinity })) {
    if (line === '') continue;
    group.push(JSON.parse(line) as Row);
    text += line.length;
    if (group.length >= GROUP_ROWS || text >= GROUP_TEXT) {
      yield group;
      group = [];
      text = 0;
    }
  }
  if (group.length > 0) yield group;
}

function output(env: JobEnv, job: JobRow, p: ViewExportParams, s: ViewExportState): Resource {
  const parameter = s.files.map((f) => ({
    name: 'output',
    part: [
      { name: 'type', valueCode: f.type },
      { name: 'name', valueString: f.name },
      { name: 'url', valueUri: `${env.fhirBase}/AsyncJob/${job.id}/output/${outputName(p, f.name)}` },
      { name: 'count', valueInteger: f.count },
    ],
  }));
  return { resourceType: 'Parameters', ...(parameter.length > 0 ? { parameter } : {}) };
}

export function viewExportKind(opts: ViewExportKindOptions = {}): JobKind<ViewExportState> {
  const pageSize = opts.pageSize ?? 1000;
  const stepMs = opts.stepMs ?? 250;
  const pagesPerStep = opts.pagesPerStep ?? 10;
  const maxCells = opts.maxCells ?? VIEW_EXPORT_MAX_CELLS;
  let ownPool: FhirpathPool | undefined;
  const fhirpath = (): FhirpathPool =>
    opts.fhirpath ?? (ownPool ??= createFhirpathPool({ timeoutMs: 10_000 }));

  /** The rows of a finished Parquet view, written as the Parquet file. */
  async function finishParquet(
    env: JobEnv,
    job: JobRow,
    p: ViewExportParams,
    f: ViewFile,
    columns: ViewColumnInfo[],
  ) {
    const rowsKey = exportFileKey(job.id, workFile(p, f));
    const key = exportFileKey(job.id, outputName(p, f.name));
    // Started afresh (a resumed step writes it again); the rows file stays (unlisted, deleted with the job's
    // files): a resumed step may need it again.
    await env.files.truncate(key, 0);
    await writeParquet(columns, rowGroups(env, rowsKey), async (bytes) => {
      await env.files.appendBytes(key, bytes);
    });
  }

  return {
    async start(env, job) {
      await env.files.deleteDir(exportDirKey(job.id));
      const lsn = env.reads?.enabled ? await env.reads.primaryLsn() : undefined;
      return { vi: 0, after: 0, files: [], total: 0, ...(lsn ? { lsn } : {}) };
    },
    async resume(env, job, s) {
      const p = paramsOf(job);
      for (const f of s.files) await env.files.truncate(exportFileKey(job.id, workFile(p, f)), f.size);
    },
    async runStep(env, job, prev): Promise<StepResult<ViewExportState>> {
      const p = paramsOf(job);
      const s: ViewExportState = { ...prev, files: prev.files.map((f) => ({ ...f })) };
      const until = Date.now() + stepMs;
      const columnsOf = new Map<number, ViewColumnInfo[]>();
      const sizer = batchSizer(pageSize);
      const db = env.reads && s.lsn ? env.reads.reader({ after: s.lsn }) : env.db;
      for (let pages = 0; s.vi < p.views.length && pages < pagesPerStep && Date.now() < until; pages++) {
        const v = p.views[s.vi] as ViewExportParams['views'][number];
        let columns = columnsOf.get(s.vi);
        if (!columns) columnsOf.set(s.vi, (columns = await fhirpath().checkView(v.view)));
        let f = s.files[s.vi];
        if (!f) s.files.push((f = { name: v.name, type: v.type, size: 0, count: 0 }));
        const found = await storedPage(db, p.data, v.type, s.after, pageSize);
        const jsons = found.map((r) => r.json);
        const workKey = exportFileKey(job.id, workFile(p, f));
        if (f.size === 0 && p.format === 'csv' && p.header)
          f.size = await env.files.append(workKey, csvHeader(columns));
        // Each batch's rows are written before the next is computed: a page's rows are never all held at once.
        for await (const rows of viewRowBatches(fhirpath(), v.view, jsons, sizer)) {
          if ((f.count + rows.length) * Math.max(1, columns.length) > maxCells)
            throw new FhirError(
              'too-costly',
              `The view '${v.name}' gives more than ${maxCells} cells (rows × columns), the limit of one view of an ` +
                'export (viewExportMaxCells); narrow it (patient, group, _since, where) or split it',
              'views.export-too-large',
            );
          const chunk = text(p, columns, rows);
          if (chunk !== '') f.size = await env.files.append(workKey, chunk);
          f.count += rows.length;
          s.total += rows.length;
          env.wrote?.('view-export', rows.length);
        }
        if (found.length > 0) s.after = Number(found[found.length - 1]?.rid);
        if (found.length < pageSize) {
          if (p.format === 'parquet') await finishParquet(env, job, p, f, columns);
          s.vi++;
          s.after = 0;
        }
      }
      const done = s.vi >= p.views.length;
      return {
        state: s,
        done,
        progress: `Exported ${s.total} rows (${Math.min(s.vi, p.views.length)} of ${p.views.length} views)`,
        ...(done ? { output: output(env, job, p, s) } : {}),
      };
    },
    async cancel(env, job) {
      await env.files.deleteDir(exportDirKey(job.id));
    },
  };
}
