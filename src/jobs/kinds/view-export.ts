// The `view-export` job ($viewdefinition-export, API.md §7; https://sql-on-fhir.org/ig/operations.html): each view
// run over the caller's stored data of its resource type, page by page in rid order, into one file per view
// (`<name>.ndjson`, `.csv` or `.parquet`), checkpointed after every step so a crash resumes and `$cancel` stops it
// between steps. Parquet is written whole at the end of a view, from its rows kept meanwhile as NDJSON beside it
// (so a view's Parquet file is built in memory: its rows once, then its columns).
import { createFhirpathPool, type FhirpathPool } from '../../fhir/csv/fhirpath-pool.js';
import { csvHeader, csvRow, ndjsonLine, type Row, type ViewColumnInfo } from '../../fhir/views/index.js';
import { rowsToParquet } from '../../fhir/views/parquet.js';
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
}

export interface ViewExportKindOptions {
  pageSize?: number;
  stepMs?: number;
  pagesPerStep?: number;
  /** The FHIRPath worker pool (main shares the app's); default: one of the kind's own, 10 s limit. */
  fhirpath?: FhirpathPool;
}

const paramsOf = (job: JobRow): ViewExportParams => job.params as unknown as ViewExportParams;
/** The file a view's rows are written to while it runs: the output itself, or the rows of a Parquet file. */
const workFile = (p: ViewExportParams, f: ViewFile): string =>
  p.format === 'parquet' ? `${f.name}.rows.ndjson` : `${f.name}.${p.format}`;
const outputName = (p: ViewExportParams, name: string): string => `${name}.${p.format}`;

function text(p: ViewExportParams, columns: ViewColumnInfo[], rows: Row[], first: boolean): string {
  if (p.format === 'csv')
    return (first && p.header ? csvHeader(columns) : '') + rows.map((r) => csvRow(columns, r)).join('');
  return rows.map((r) => ndjsonLine(columns, r)).join('');
}

/** Reads a whole stored text file (the rows of a Parquet file). */
async function readText(env: JobEnv, key: string): Promise<string> {
  const stream = await env.files.read(key);
  if (!stream) return '';
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(Buffer.from(c as Buffer));
  return Buffer.concat(chunks).toString('utf8');
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
    const lines = (await readText(env, rowsKey)).split('\n').filter((l) => l !== '');
    const rows = lines.map((l) => JSON.parse(l) as Row);
    // The rows file stays (unlisted, deleted with the job's files): a resumed step may need it again.
    await env.files.put(exportFileKey(job.id, outputName(p, f.name)), rowsToParquet(columns, rows));
  }

  return {
    async start(env, job) {
      await env.files.deleteDir(exportDirKey(job.id));
      return { vi: 0, after: 0, files: [], total: 0 };
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
      for (let pages = 0; s.vi < p.views.length && pages < pagesPerStep && Date.now() < until; pages++) {
        const v = p.views[s.vi] as ViewExportParams['views'][number];
        let columns = columnsOf.get(s.vi);
        if (!columns) columnsOf.set(s.vi, (columns = await fhirpath().checkView(v.view)));
        let f = s.files[s.vi];
        if (!f) s.files.push((f = { name: v.name, type: v.type, size: 0, count: 0 }));
        const found = await storedPage(env.db, p.data, v.type, s.after, pageSize);
        const rows =
          found.length > 0
            ? await fhirpath().viewRows(
                v.view,
                found.map((r) => r.json),
              )
            : [];
        const chunk = text(p, columns, rows, f.size === 0);
        if (chunk !== '') f.size = await env.files.append(exportFileKey(job.id, workFile(p, f)), chunk);
        f.count += rows.length;
        s.total += rows.length;
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
