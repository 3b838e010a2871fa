// Download of a completed export's NDJSON or CSV file (https://hl7.org/fhir/uv/bulkdata/export.html#file-request):
// the same access rule as the job itself (API.md §5); anything else is 404.
import type { Readable } from 'node:stream';
import type { Db } from '../../storage/db.js';
import type { FileStore } from '../../storage/files.js';
import { exportFileKey } from '../../jobs/kinds/export.js';
import { CSV_CONTENT_TYPE } from '../csv/table.js';
import { FhirError } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import { accessibleJob } from './async-job.js';

export async function openJobOutput(
  db: Db,
  files: FileStore,
  ctx: RepoContext,
  id: string,
  file: string,
): Promise<{ stream: Readable; contentType: string }> {
  const notFound = new FhirError('not-found', 'Not found', 'job.output.not-found');
  const m = /^[A-Za-z]{1,64}\.(ndjson|csv)$/.exec(file);
  const { job } = await accessibleJob(db, ctx, id);
  if (!m || job.status !== 'completed') throw notFound;
  const stream = await files.read(exportFileKey(id, file));
  if (!stream) throw notFound;
  return { stream, contentType: m[1] === 'csv' ? CSV_CONTENT_TYPE : 'application/fhir+ndjson' };
}
