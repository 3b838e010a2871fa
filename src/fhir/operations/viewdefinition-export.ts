// $viewdefinition-export (API.md §7; https://sql-on-fhir.org/ig/OperationDefinition-ViewDefinitionExport.html):
// several views over the caller's stored data in one AsyncJob (kind `view-export`), `Prefer: respond-async`, then
// status, `$cancel`, `DELETE`, retention and quotas exactly as a bulk export (API.md §5). Every view is checked (422
// for one that cannot be processed) before the job is accepted.
import { EXPORT_KINDS } from '../../jobs/queue.js';
import type { ViewExportParams } from '../../jobs/kinds/view-export.js';
import { FhirError } from '../outcome.js';
import type { FhirResult } from '../result.js';
import { assertRespondAsync, startJob } from './async-start.js';
import type { OperationDefinition, OperationEnv, OperationInput } from './operation.js';
import {
  booleanParam,
  compartmentParams,
  named,
  resolveView,
  single,
  viewFormat,
  viewParams,
} from './view-params.js';
import { viewData } from './view-source.js';

/** Views one export may hold. */
export const MAX_EXPORT_VIEWS = 20;
/** A view's output name: a database-friendly name, as the specification asks of `ViewDefinition.name`. */
const NAME = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

const bad = (message: string, code: string): FhirError => new FhirError('invalid', message, `views.${code}`);

export async function startViewExport(env: OperationEnv, i: OperationInput): Promise<FhirResult> {
  assertRespondAsync(i.request.prefer);
  const params = viewParams(i.request);
  const parts = named(params, 'view');
  if (parts.length === 0) throw bad('Give at least one view parameter', 'no-view');
  if (parts.length > MAX_EXPORT_VIEWS)
    throw bad(`At most ${MAX_EXPORT_VIEWS} views per export`, 'too-many-views');
  const format = viewFormat(single(params, '_format'), undefined, ['ndjson', 'csv', 'parquet'], 'ndjson');
  const header = booleanParam(single(params, 'header'), 'header', true);
  const views: ViewExportParams['views'] = [];
  for (const [n, part] of parts.entries()) {
    const view = await resolveView(env.db, i.ctx, part.part ?? []);
    await env.csv.fhirpath.checkView(view);
    const given = single(part.part ?? [], 'name') ?? view.name ?? `view_${n + 1}`;
    const name = String(given);
    if (!NAME.test(name))
      throw bad(`View name '${name.slice(0, 64)}' must be letters, digits and _ (a letter first)`, 'name');
    if (views.some((v) => v.name === name)) throw bad(`Two views are named '${name}'`, 'duplicate-name');
    views.push({ name, type: String(view.resource), view });
  }
  const selection = { ...compartmentParams(params), since: single(params, '_since') };
  const data = await viewData(
    env.db,
    i.ctx,
    views.map((v) => v.type),
    selection,
  );
  const job: ViewExportParams = { views, format, header, data };
  return startJob(env.db, env.signals, i.ctx, 'view-export', { ...job }, i.request.url, {
    kinds: EXPORT_KINDS,
    max: env.maxActiveExportsPerUser,
  });
}

export const viewDefinitionExportOperation: OperationDefinition = {
  code: 'viewdefinition-export',
  level: 'system',
  affectsState: true,
  definition: 'http://sql-on-fhir.org/OperationDefinition/$viewdefinition-export',
  run: startViewExport,
};
