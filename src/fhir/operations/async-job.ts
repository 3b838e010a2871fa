// Reading an AsyncJob's status (https://hl7.org/fhir/uv/bulkdata/export.html#bulk-data-status-request, API.md §5):
// 202 with X-Progress while `accepted`, 200 once final; 404 to whoever may not access the job.
import type { Queryable } from '../../storage/db.js';
import { jobProgress } from '../../jobs/queue.js';
import type { AsyncJobResource } from '../../jobs/async-job.js';
import { canAccessJob } from '../access.js';
import { FhirError } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import { selectCurrent, type StoredRow } from '../repository/store.js';
import { RawJson, type FhirResult } from '../result.js';

/** The AsyncJob row when it exists, is not deleted and the caller may access it; otherwise a 404. */
export async function accessibleJob(
  db: Queryable,
  ctx: RepoContext,
  id: string,
  forUpdate = false,
): Promise<{ row: StoredRow; job: AsyncJobResource }> {
  const row = await selectCurrent(db, 'AsyncJob', id, forUpdate);
  const job = row && !row.deleted ? (JSON.parse(row.json) as AsyncJobResource) : undefined;
  if (
    !row ||
    !job ||
    !canAccessJob(ctx.actor, ctx.author, { projectId: row.project_id, author: job.meta?.author?.reference })
  ) {
    throw new FhirError('not-found', 'Not found', 'job.not-found');
  }
  return { row, job };
}

export async function readJobStatus(db: Queryable, ctx: RepoContext, id: string): Promise<FhirResult> {
  const { row, job } = await accessibleJob(db, ctx, id);
  const common = { versionId: String(row.version_id), lastModified: row.last_updated };
  if (job.status !== 'accepted') return { status: 200, body: new RawJson(row.json), ...common };
  const progress = (await jobProgress(db, id)) ?? 'accepted';
  return { status: 202, body: new RawJson(row.json), headers: { 'x-progress': progress }, ...common };
}
