// The Bulk Data IG's delete request, DELETE {fhir}/AsyncJob/<id>
// (https://hl7.org/fhir/uv/bulkdata/export.html#bulk-data-delete-request, API.md §5): a running job is cancelled as
// $cancel does (its worker stops and deletes its files), an ended job's files are deleted, and in every case the
// AsyncJob is deleted with them: its status (either way of asking), its files, $cancel and a second DELETE answer
// 404 from then on. 202 when it was there.
import type { Db } from '../../storage/db.js';
import type { FileStore } from '../../storage/files.js';
import type { Signals } from '../../storage/signals.js';
import { cancelJobRow, deleteJobResource } from '../../jobs/async-job.js';
import { exportDirKey } from '../../jobs/kinds/export.js';
import { JOBS_CHANNEL } from '../../jobs/queue.js';
import { outcome } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import type { FhirResult } from '../result.js';
import { selectCurrent } from '../repository/store.js';
import { accessibleJob } from './async-job.js';

export async function deleteAsyncJob(
  db: Db,
  signals: Signals,
  files: FileStore,
  ctx: RepoContext,
  id: string,
): Promise<FhirResult> {
  const was = await db.transaction(async (tx) => {
    const { row, job } = await accessibleJob(tx, ctx, id, true);
    if (job.status === 'accepted') await cancelJobRow(tx, ctx, row);
    // The cancel wrote a version: delete the current one.
    const current = job.status === 'accepted' ? await selectCurrent(tx, 'AsyncJob', id, true) : row;
    if (current) await deleteJobResource(tx, ctx, current);
    return job.status;
  });
  if (was === 'accepted') await signals.publish(JOBS_CHANNEL, `cancel ${id}`);
  // A cancelled job's worker deletes its own partial files; an ended job's are deleted here, after the commit, so
  // that no reader can see the job listing files that are gone.
  else if (was !== 'cancelled') await files.deleteDir(exportDirKey(id));
  return {
    status: 202,
    body: outcome(
      'information',
      'informational',
      was === 'accepted' ? `AsyncJob/${id} cancelled and deleted` : `AsyncJob/${id} deleted`,
    ),
  };
}
