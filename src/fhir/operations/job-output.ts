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
import { FhirError } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import { accessibleJob, outputFiles } from './async-job.js';

/** Whether the job's `output` or `error` files include one whose URL ends in `/AsyncJob/<id>/output/<file>`. */
function lists(job: AsyncJobResource, id: string, file: string): boolean {
  const suffix = `/AsyncJob/${id}/output/${file}`;
  return [...outputFiles(job, 'output'), ...outputFiles(job, 'error')].some((f) => f.url.endsWith(suffix));
}

export async function openJobOutput(
  db: Db,
  files: FileStore,
  ctx: RepoContext,
  id: string,
  file: string,
): Promise<{ stream: Readable; contentType: string }> {
  const notFound = new FhirError('not-found', 'Not found', 'job.output.not-found');
  const m = /^[A-Za-z]{1,64}(\.[0-9]{1,6})?\.(ndjson|csv)$/.exec(file);
  const { job } = await accessibleJob(db, ctx, id);
  if (!m || !isPlainFileName(id) || job.status !== 'completed' || !lists(job, id, file)) throw notFound;
  let stream: Readable | undefined;
  try {
    stream = await files.read(exportFileKey(id, file));
  } catch (err) {
    if (err instanceof InvalidFileKeyError) throw notFound;
    throw err;
  }
  if (!stream) throw notFound;
  return { stream, contentType: m[2] === 'csv' ? CSV_CONTENT_TYPE : 'application/fhir+ndjson' };
}
