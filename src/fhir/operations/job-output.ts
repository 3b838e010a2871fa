// Download of a completed export's NDJSON or CSV file (https://hl7.org/fhir/uv/bulkdata/export.html#file-request):
// the same access rule as the job itself (API.md §5); anything else is 404. Only a file that the job's current
// `output` lists is served, so a file left behind (or a name nobody published) is never reachable, and once the
// retention sweep has removed the output (API.md §1 `exportRetention`) the URLs answer 404 even before the disk is
// cleaned.
import type { Readable } from 'node:stream';
import type { Db } from '../../storage/db.js';
import { InvalidFileKeyError, isPlainFileName, type FileStore } from '../../storage/files.js';
import type { AsyncJobResource } from '../../jobs/async-job.js';
import { exportFileKey } from '../../jobs/kinds/export.js';
import { CSV_CONTENT_TYPE } from '../csv/table.js';
import { assertRead } from '../access.js';
import { FhirError } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import { accessibleJob, outputFiles } from './async-job.js';

/** The job's `output` (or `error`) file whose URL ends in `/AsyncJob/<id>/output/<file>`, if it lists one. */
function listed(
  job: AsyncJobResource,
  id: string,
  file: string,
): { type: string; error: boolean; view?: boolean } | undefined {
  const suffix = `/AsyncJob/${id}/output/${file}`;
  const output = outputFiles(job, 'output').find((f) => f.url.endsWith(suffix));
  if (output)
    return { type: output.type, error: false, ...(output.name !== undefined ? { view: true } : {}) };
  return outputFiles(job, 'error').some((f) => f.url.endsWith(suffix))
    ? { type: 'OperationOutcome', error: true }
    : undefined;
}

/** A view's NDJSON holds rows, not resources: plain `application/x-ndjson`. */
function contentTypeOf(file: string, view: boolean): string {
  if (file.endsWith('.csv')) return CSV_CONTENT_TYPE;
  if (file.endsWith('.parquet')) return 'application/vnd.apache.parquet';
  return view ? 'application/x-ndjson' : 'application/fhir+ndjson';
}

export async function openJobOutput(
  db: Db,
  files: FileStore,
  ctx: RepoContext,
  id: string,
  file: string,
): Promise<{ stream: Readable; contentType: string }> {
  const notFound = new FhirError('not-found', 'Not found', 'job.output.not-found');
  // `Patient.ndjson`, `Patient.2.ndjson`, `Patient.csv`; a views export's `<view name>.ndjson|csv|parquet`.
  const m = /^[A-Za-z][A-Za-z0-9_]{0,63}(\.[0-9]{1,6})?\.(ndjson|csv|parquet)$/.exec(file);
  const { job } = await accessibleJob(db, ctx, id);
  const entry = m && isPlainFileName(id) && job.status === 'completed' ? listed(job, id, file) : undefined;
  if (!entry) throw notFound;
  // A file of Patients is read like Patients: a token whose scopes do not cover the type gets 403 (SMART scopes).
  if (!entry.error) assertRead(ctx.actor, entry.type);
  let stream: Readable | undefined;
  try {
    stream = await files.read(exportFileKey(id, file));
  } catch (err) {
    if (err instanceof InvalidFileKeyError) throw notFound;
    throw err;
  }
  if (!stream) throw notFound;
  return { stream, contentType: contentTypeOf(file, entry.view === true) };
}
