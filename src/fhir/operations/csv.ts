// GET {fhir}/<type>/$csv?_fields=...&<search parameters> (API.md §6, seed §4.4): the matching resources the caller
// may see, at most 1000, in the search's order, as a CSV file; `X-Total-Count` tells how many matched.
import type { Queryable } from '../../storage/db.js';
import { assertChainsReadable, searchScope } from '../access.js';
import { chainedTypes } from '../repository/search.js';
import {
  assertCsvType,
  csvTable,
  CSV_CONTENT_TYPE,
  CSV_MAX_ROWS,
  fieldsParam,
  isCsvType,
  type CellFailure,
} from '../csv/table.js';
import type { CsvRuntime } from '../csv/runtime.js';
import type { RepoContext } from '../repository/context.js';
import { RawText, type FhirResult } from '../result.js';
import { executeSearch } from '../search/execute.js';
import { parseSearchRequest, type SearchRequest } from '../search/parse.js';
import type { OperationDefinition } from './operation.js';

/**
 * Result parameters that do not choose resources: $csv always answers up to 1000 rows of the type itself, so
 * paging, includes, `_elements`, `_summary` and `_total` do not apply (`_sort` does).
 */
const NOT_FILTERS = [
  '_fields',
  '_count',
  '_cursor',
  '_offset',
  '_total',
  '_summary',
  '_elements',
  '_include',
  '_include:iterate',
  '_revinclude',
  '_revinclude:iterate',
];

export async function csvExport(
  db: Queryable,
  csv: CsvRuntime,
  ctx: RepoContext,
  resourceType: string,
  query: Record<string, string | string[] | undefined>,
  /** Told once per request when a FHIRPath failed on some resources (their cells are empty). */
  onFailures: (f: { count: number; first: CellFailure }) => void,
): Promise<FhirResult> {
  assertCsvType(resourceType);
  const scope = searchScope(ctx.actor, ctx.author, resourceType, ctx.scope);
  const fields = fieldsParam(query._fields);
  const parsed = parseSearchRequest(resourceType, query, { ignore: NOT_FILTERS });
  // As for any search: a chain may only go through types the caller may read.
  assertChainsReadable(ctx.actor, chainedTypes(parsed));
  // A few requests at a time per process: the others wait instead of crowding out every other tenant's reads.
  return csv.slots.run(async () => {
    const table = await csvTable(resourceType, fields, csv.fhirpath);
    // Elements no column reads stay in storage when that is known (less to send and parse).
    const req: SearchRequest = {
      ...parsed,
      // Rows come oldest `meta.lastUpdated` first unless `_sort` says otherwise (a search's own default may differ).
      sort:
        parsed.sort.length > 0 ? parsed.sort : [{ code: '_lastUpdated', type: 'date', descending: false }],
      count: CSV_MAX_ROWS,
      ...(table.omit ? { omit: table.omit } : {}),
    };
    // The count runs beside the page query (it is only needed when the page is full: then the page cannot tell).
    const [found, counted] = await Promise.all([
      executeSearch(db, req, scope),
      executeSearch(db, { ...req, count: 0, total: 'accurate' }, scope),
    ]);
    const total = found.total ?? counted.total ?? 0;
    const text = table.head + (await table.rows(found.matches.map((m) => m.json)));
    const failures = table.failures();
    if (failures) onFailures(failures);
    return {
      status: 200,
      body: new RawText(text, CSV_CONTENT_TYPE),
      headers: { 'content-disposition': 'attachment; filename=export.csv', 'x-total-count': String(total) },
    };
  });
}

export const csvOperation: OperationDefinition = {
  code: 'csv',
  level: 'type',
  types: 'any',
  supports: isCsvType,
  affectsState: false,
  methods: ['GET'],
  replicaReads: true,
  run: (env, i) =>
    csvExport(env.db, env.csv, i.ctx, i.type, i.request.query, (failures) =>
      i.warn({ failures }, '$csv: a FHIRPath failed on some resources; their cells are empty'),
    ),
};
