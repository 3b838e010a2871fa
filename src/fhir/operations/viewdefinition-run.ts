// $viewdefinition-run (API.md §7; https://sql-on-fhir.org/ig/OperationDefinition-ViewDefinitionRun.html): a view's
// rows now, as JSON, NDJSON or CSV, over inline `resource`s or the caller's stored data (`patient`, `group`,
// `_since`), at most `_limit` rows (`X-Truncated: true` when more were found). The view is checked and run in the
// FHIRPath worker pool under its deadline, like `$csv`; rows are all computed before the answer is sent.
import { stringifyJson } from '../json/stringify.js';
import type { RepoContext } from '../repository/context.js';
import { FhirError } from '../outcome.js';
import { RawText, type FhirResult } from '../result.js';
import { assertDepth, MAX_RESOURCE_DEPTH } from '../validation/depth.js';
import { rowsToCsv, rowsToJson, rowsToNdjson, type Row } from '../views/index.js';
import type { OperationDefinition, OperationEnv, OperationInput } from './operation.js';
import {
  booleanParam,
  compartmentParams,
  limitParam,
  named,
  readStoredView,
  resolveView,
  single,
  viewFormat,
  viewParams,
  type Json,
} from './view-params.js';
import { storedPages, viewData } from './view-source.js';

/** Rows one call may answer (API.md §7: the default and the maximum of `_limit`). */
export const VIEW_RUN_MAX_ROWS = 10_000;
/** Resources sent to the worker pool at once. */
const BATCH = 500;

const CONTENT_TYPES = {
  json: 'application/json; charset=utf-8',
  ndjson: 'application/x-ndjson; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
} as const;

/** Collects rows from batches of resource texts until more than `limit` are found. */
async function collect(
  env: OperationEnv,
  view: Json,
  batches: AsyncIterable<string[]> | Iterable<string[]>,
  limit: number,
): Promise<{ rows: Row[]; truncated: boolean }> {
  const rows: Row[] = [];
  for await (const jsons of batches) {
    if (jsons.length === 0) continue;
    rows.push(...(await env.csv.fhirpath.viewRows(view, jsons)));
    if (rows.length > limit) return { rows: rows.slice(0, limit), truncated: true };
  }
  return { rows, truncated: false };
}

function* inlineBatches(resources: Json[]): Iterable<string[]> {
  for (let i = 0; i < resources.length; i += BATCH) yield resources.slice(i, i + BATCH).map(stringifyJson);
}

async function* storedBatches(
  env: OperationEnv,
  ctx: RepoContext,
  type: string,
  params: ReturnType<typeof viewParams>,
): AsyncIterable<string[]> {
  const data = await viewData(env.db, ctx, [type], {
    ...compartmentParams(params),
    since: single(params, '_since'),
  });
  for await (const page of storedPages(env.db, data, type, BATCH)) yield page.jsons;
}

export async function runView(env: OperationEnv, i: OperationInput): Promise<FhirResult> {
  const params = viewParams(i.request);
  const format = viewFormat(single(params, '_format'), i.request.accept, ['json', 'ndjson', 'csv'], 'ndjson');
  const header = booleanParam(single(params, 'header'), 'header', true);
  const limit = limitParam(single(params, '_limit'), VIEW_RUN_MAX_ROWS);
  // On a stored view (`ViewDefinition/<id>/$viewdefinition-run`) the URL names the view: another one is refused
  // rather than ignored.
  if (i.id && named(params, 'viewResource').length + named(params, 'viewReference').length > 0)
    throw new FhirError(
      'invalid',
      'The view is the ViewDefinition of the URL: give neither viewResource nor viewReference',
      'views.view-choice',
    );
  const view = i.id ? await readStoredView(env.db, i.ctx, i.id) : await resolveView(env.db, i.ctx, params);
  const inline = named(params, 'resource').map((p) => {
    if (!p.resource)
      throw new FhirError('invalid', 'A resource parameter must hold a resource', 'views.resource');
    // Held to the depth of a stored resource, as the view is (view-params.ts).
    assertDepth(p.resource, MAX_RESOURCE_DEPTH, 'resource', 'views.too-deep');
    return p.resource;
  });
  return env.csv.slots.run(async () => {
    // Every check of the view (422 for one that cannot be processed) before any data is read.
    const columns = await env.csv.fhirpath.checkView(view);
    const type = String(view.resource);
    const { rows, truncated } = await collect(
      env,
      view,
      inline.length > 0 ? inlineBatches(inline) : storedBatches(env, i.ctx, type, params),
      limit,
    );
    const text =
      format === 'csv'
        ? rowsToCsv(columns, rows, { header })
        : format === 'json'
          ? rowsToJson(columns, rows)
          : rowsToNdjson(columns, rows);
    return {
      status: 200,
      body: new RawText(text, CONTENT_TYPES[format]),
      ...(truncated ? { headers: { 'x-truncated': 'true' } } : {}),
    };
  });
}

const DEFINITION = 'http://sql-on-fhir.org/OperationDefinition/$viewdefinition-run';

/** System level (`{fhir}/$viewdefinition-run`) and on a stored view (`ViewDefinition/<id>/$viewdefinition-run`). */
export const viewDefinitionRunOperations: OperationDefinition[] = [
  { code: 'viewdefinition-run', level: 'system', affectsState: false, definition: DEFINITION, run: runView },
  {
    code: 'viewdefinition-run',
    level: 'instance',
    types: ['ViewDefinition'],
    affectsState: false,
    definition: DEFINITION,
    run: runView,
  },
];
