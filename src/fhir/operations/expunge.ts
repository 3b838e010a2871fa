// POST {fhir}/Project/<id>/$expunge?everything=true (API.md §5): super administrators only; permanently deletes the
// project's resources as a cancellable job (src/jobs/kinds/expunge.ts).
import type { Db } from '../../storage/db.js';
import type { Signals } from '../../storage/signals.js';
import { assertSuperAdmin } from '../access.js';
import { FhirError } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import { readVisibleRow } from '../repository/read.js';
import type { FhirResult } from '../result.js';
import { assertRespondAsync, operationParams, startJob, type AsyncRequest } from './async-start.js';
import type { OperationDefinition } from './operation.js';

export async function startExpunge(
  db: Db,
  signals: Signals,
  ctx: RepoContext,
  projectId: string,
  req: AsyncRequest,
): Promise<FhirResult> {
  assertSuperAdmin(ctx.actor, '$expunge');
  assertRespondAsync(req.prefer);
  if (operationParams(req).everything?.[0] !== 'true') {
    throw new FhirError('invalid', '$expunge needs everything=true', 'expunge.everything');
  }
  const row = await readVisibleRow(db, ctx, 'Project', projectId);
  if (!row) throw new FhirError('not-found', `Not found: Project/${projectId}`, 'expunge.not-found');
  return startJob(db, signals, ctx, 'expunge', { projectId }, req.url);
}

export const expungeOperation: OperationDefinition = {
  code: 'expunge',
  level: 'instance',
  types: ['Project'],
  affectsState: true,
  run: (env, i) => startExpunge(env.db, env.signals, i.ctx, i.id, i.request),
};
