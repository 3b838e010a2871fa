// POST {fhir}/AsyncJob/<id>/$cancel (seed §3, §4.3, §7; API.md §5); DELETE on the job status maps here too.
// Only records the request: the job's worker, wherever it runs, learns of it from the `jobs` signal or its next
// checkpoint write, stops and deletes its partial files.
import type { Db } from '../../storage/db.js';
import type { Signals } from '../../storage/signals.js';
import { cancelJobRow } from '../../jobs/async-job.js';
import { JOBS_CHANNEL } from '../../jobs/queue.js';
import { FhirError, outcome } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import type { FhirResult } from '../result.js';
import { accessibleJob } from './async-job.js';
import type { OperationDefinition } from './operation.js';

export async function cancelAsyncJob(
  db: Db,
  signals: Signals,
  ctx: RepoContext,
  id: string,
): Promise<FhirResult> {
  const changed = await db.transaction(async (tx) => {
    const { row, job } = await accessibleJob(tx, ctx, id, true);
    if (job.status === 'cancelled') return false;
    if (job.status !== 'accepted') {
      throw new FhirError(
        'invalid',
        `AsyncJob cannot be cancelled if status is not 'accepted', job had status '${job.status}'`,
        'job.cancel.status',
      );
    }
    await cancelJobRow(tx, ctx, row);
    return true;
  });
  if (changed) await signals.publish(JOBS_CHANNEL, `cancel ${id}`);
  return {
    status: 200,
    body: outcome(
      'information',
      'informational',
      changed ? `AsyncJob/${id} cancelled` : `AsyncJob/${id} was already cancelled`,
    ),
  };
}

export const cancelOperation: OperationDefinition = {
  code: 'cancel',
  level: 'instance',
  types: ['AsyncJob'],
  affectsState: true,
  anyBody: true,
  run: (env, i) => cancelAsyncJob(env.db, env.signals, i.ctx, i.id),
};
