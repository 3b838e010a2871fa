// $viewdefinition-run (API.md §7; https://sql-on-fhir.org/ig/OperationDefinition-ViewDefinitionRun.html): a view's
// rows now, as JSON, NDJSON or CSV, over inline `resource`s or the caller's stored data (`patient`, `group`,
// `_since`), at most `_limit` rows (`X-Truncated: true` when more were found). The view is checked and run in the
// FHIRPath worker pool under its deadline, like `$csv`; rows are all computed before the answer is sent.
import { stringifyJson } from '../json/stringify.js';
import type { RepoContext } from '../repository/context.js';
import { FhirError } from '../outcome.js';
import { RawText, type FhirResult } from '../result.js';
import { assertDepth, MAX_RESOURCE_DEPTH } from '../validation/depth.js';
import { batchSizer, viewRowBatches } from '../views/batches.js';
import { csvHeader, csvRow, ndjsonLine, type Row, type ViewColumnInfo } from '../views/index.js';
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
/** Resources read from the database at once (the worker pool gets them in smaller batches: views/batches.ts). */
const BATCH = 500;
/**
 * Bytes one answer may hold (issue 25 point 7): 10,000 rows of a `collection` column over large resources would
 * otherwise build a string of gigabytes. Rows beyond it are left out, as beyond `_limit` (`X-Truncated: true`).
 */
export const VIEW_RUN_MAX_BYTES = 32 * 1024 * 1024;
/**
 * Milliseconds a run may spend reading and evaluating stored data before it stops with 422 too-costly (a view whose
 * `where` drops nearly every resource of a large project would otherwise scan it all while the caller waits); the
 * export has no such limit.
 */
export const VIEW_RUN_MAX_MS = 15_000;

const CONTENT_TYPES = {
  json: 'application/json; charset=utf-8',
  ndjson: 'application/x-ndjson; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
} as const;

/** The answer's text, row by row, within `limit` rows and VIEW_RUN_MAX_BYTES. */
class Answer {
  private readonly parts: string[] = [];
  private bytes = 0;
  rows = 0;
  truncated = false;
  constructor(
    private readonly format: 'json' | 'ndjson' | 'csv',
    private readonly columns: ViewColumnInfo[],
    private readonly limit: number,
    header: boolean,
  ) {
    if (format === 'csv' && header) this.push(csvHeader(columns));
  }
  private push(text: string): void {
    this.parts.push(text);
    this.bytes += Buffer.byteLength(text);
  }
  /** Adds rows; false once the answer is full (rows were left out). */
  add(rows: readonly Row[]): boolean {
    for (const row of rows) {
      if (this.rows >= this.limit) return !(this.truncated = true);
      const text =
        this.format === 'csv'
          ? csvRow(this.columns, row)
          : this.format === 'json'
            ? (this.rows > 0 ? ',' : '') + ndjsonLine(this.columns, row).slice(0, -1)
            : ndjsonLine(this.columns, row);
      if (this.bytes + Buffer.byteLength(text) > VIEW_RUN_MAX_BYTES) return !(this.truncated = true);
      this.push(text);
      this.rows++;
    }
    return true;
  }
  text(): string {
    return this.format === 'json' ? `[${this.parts.join('')}]` : this.parts.join('');
  }
}

/** Writes rows from batches of resource texts into the answer until it is full or the time is up. */
async function collect(
  env: OperationEnv,
  view: Json,
  batches: AsyncIterable<string[]> | Iterable<string[]>,
  answer: Answer,
): Promise<void> {
  const until = Date.now() + VIEW_RUN_MAX_MS;
  const sizer = batchSizer(BATCH);
  for await (const jsons of batches) {
    for await (const rows of viewRowBatches(env.csv.fhirpath, view, jsons, sizer)) {
      if (!answer.add(rows)) return;
      if (Date.now() > until)
        throw new FhirError(
          'too-costly',
          `The view ran longer than ${VIEW_RUN_MAX_MS} ms over the stored data; narrow it (patient, group, _since, where) or use $viewdefinition-export`,
          'views.run-too-long',
          { status: 422 },
        );
    }
  }
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
    const answer = new Answer(format, columns, limit, header);
    await collect(
      env,
      view,
      inline.length > 0 ? inlineBatches(inline) : storedBatches(env, i.ctx, type, params),
      answer,
    );
    return {
      status: 200,
      body: new RawText(answer.text(), CONTENT_TYPES[format]),
      ...(answer.truncated ? { headers: { 'x-truncated': 'true' } } : {}),
    };
  });
}

const DEFINITION = 'http://sql-on-fhir.org/OperationDefinition/$viewdefinition-run';

/** System level (`{fhir}/$viewdefinition-run`) and on a stored view (`ViewDefinition/<id>/$viewdefinition-run`). */
export const viewDefinitionRunOperations: OperationDefinition[] = [
  {
    code: 'viewdefinition-run',
    level: 'system',
    affectsState: false,
    replicaReads: true,
    definition: DEFINITION,
    run: runView,
  },
  {
    code: 'viewdefinition-run',
    level: 'instance',
    types: ['ViewDefinition'],
    affectsState: false,
    replicaReads: true,
    definition: DEFINITION,
    run: runView,
  },
];
