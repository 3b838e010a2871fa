// POST {fhir}/$reindex (API.md §5): super administrators only; recomputes the search index of all types or of
// `_type`, as a job (src/jobs/kinds/reindex.ts).
import type { Db } from '../../storage/db.js';
import type { Signals } from '../../storage/signals.js';
import { assertSuperAdmin } from '../access.js';
import { isResourceType, resourceTypes } from '../definitions/index.js';
import { FhirError } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import type { FhirResult } from '../result.js';
import { assertRespondAsync, operationParams, startJob, type AsyncRequest } from './async-start.js';
import type { OperationDefinition } from './operation.js';

export async function startReindex(
  db: Db,
  signals: Signals,
  ctx: RepoContext,
  req: AsyncRequest,
): Promise<FhirResult> {
  assertSuperAdmin(ctx.actor, '$reindex');
  assertRespondAsync(req.prefer);
  const asked = operationParams(req)._type?.flatMap((v) => v.split(',').map((t) => t.trim()));
  for (const t of asked ?? []) {
    if (!isResourceType(t))
      throw new FhirError('invalid', `Unknown resource type in _type: ${t.slice(0, 64)}`, 'reindex.type');
  }
  return startJob(db, signals, ctx, 'reindex', { types: asked ?? [...resourceTypes()] }, req.url);
}

export const reindexOperation: OperationDefinition = {
  code: 'reindex',
  level: 'system',
  affectsState: true,
  run: (env, i) => startReindex(env.db, env.signals, i.ctx, i.request),
};
