// What a write does for custom search parameters (API.md §9 "Search"), inside the write's transaction: the index
// values of the project's (and the shared) SearchParameters beside the built-in ones, and for a stored active
// SearchParameter the checks that need the database and the reindex AsyncJob of its project that storing it starts.
import { createHash } from 'node:crypto';
import type { Queryable } from '../../storage/db.js';
import { createJob } from '../../jobs/async-job.js';
import { FhirError } from '../outcome.js';
import { isActive, readSearchParameter } from '../search/custom-params.js';
import { MAX_PROJECT_SEARCH_PARAMETERS } from '../search/custom-registry.js';
import type { RepoContext } from './context.js';
import type { PreparedWrite } from './prepare.js';
import { parseSearchRequest, type ParseOptions } from '../search/parse.js';
import type { SearchRequest } from '../search/request.js';
import { rekey } from '../search/custom-params.js';

/**
 * A search of the caller's project (a super administrator's: of its own project's parameters), with the project's
 * custom parameters beside the built-in ones, their codes replaced by their index keys.
 */
export async function parseProjectSearch(
  db: Queryable,
  ctx: RepoContext,
  resourceType: string,
  query: Record<string, string | string[] | undefined>,
  opts: ParseOptions = {},
): Promise<SearchRequest> {
  if (!ctx.searchParams) return parseSearchRequest(resourceType, query, opts);
  const set = await ctx.searchParams.forProject(db, ctx.scope.projectId ?? ctx.actor.projectId);
  if (set.size === 0) return parseSearchRequest(resourceType, query, opts);
  return rekey(parseSearchRequest(resourceType, query, { ...opts, params: set.get }), set);
}

/** Whether storing these versions needs a transaction (a SearchParameter starts a job with it). */
export const needsTransaction = (items: readonly PreparedWrite[]): boolean =>
  items.some((it) => it.resource.resourceType === 'SearchParameter' && isActive(it.resource));

/**
 * Attaches the custom index values to each version (`index`), and for each active SearchParameter checks it against
 * the project's others and the shared ones and starts its reindex job. `db` is the write's transaction whenever a
 * SearchParameter is among the items (see needsTransaction).
 */
export async function prepareCustomIndex(
  db: Queryable,
  ctx: RepoContext,
  items: readonly PreparedWrite[],
): Promise<void> {
  const stored = items.filter(
    (it) => it.resource.resourceType === 'SearchParameter' && isActive(it.resource),
  );
  if (stored.length) await storedSearchParameters(db, ctx, stored);
  const registry = ctx.searchParams;
  if (!registry) return;
  for (const it of items) {
    const set = await registry.forProject(db, it.projectId);
    if (set.of(it.resource.resourceType).length === 0) continue;
    const index = set.extract(it.resource);
    if (index.length) it.index = index;
  }
}

const taken = (code: string, where: string, ruleCode: string): FhirError =>
  new FhirError(
    'invalid',
    `SearchParameter.code '${code}' is already ${where}`,
    `search-parameter.${ruleCode}`,
    {
      expression: ['SearchParameter.code'],
    },
  );

/** Lock space of the advisory lock that serialises SearchParameter writes of one project (distinct from the jobs'). */
const SEARCH_PARAMETER_LOCK_SPACE = 72_410_019;

/**
 * Serialises the SearchParameter writes of a project until the transaction ends, so that two concurrent writes cannot
 * both find a code free, nor both find room under the limit.
 */
async function lockProject(tx: Queryable, projectId: string): Promise<void> {
  const key = createHash('sha256').update(projectId).digest().readInt32BE(0);
  await tx.query('SELECT pg_advisory_xact_lock($1::int, $2::int)', [SEARCH_PARAMETER_LOCK_SPACE, key]);
}

/** AsyncJob.request of a reindex: the SearchParameter stored, or a search for those stored together. */
const requestOf = (fhirBase: string, ids: readonly string[]): string =>
  ids.length === 1
    ? `${fhirBase}/SearchParameter/${ids[0] as string}`
    : `${fhirBase}/SearchParameter?_id=${ids.join(',')}`;

/** The project's other active SearchParameters: code and bases. */
async function othersOf(
  db: Queryable,
  projectId: string,
  ids: readonly string[],
): Promise<{ code: string; base: string[] }[]> {
  const r = await db.query<{ code: string | null; base: string[] | null }>(
    `SELECT content->>'code' AS code, ARRAY(SELECT json_array_elements_text(content->'base')) AS base
     FROM resources WHERE resource_type = 'SearchParameter' AND project_id = $1 AND NOT deleted
       AND content->>'status' = 'active' AND id <> ALL($2::text[])`,
    [projectId, ids],
  );
  return r.rows.map((row) => ({ code: row.code ?? '', base: row.base ?? [] }));
}

/**
 * Checks active SearchParameters about to be stored (each alone, against the shared ones, the project's others and
 * each other), then starts one reindex job per project for their bases.
 */
async function storedSearchParameters(
  db: Queryable,
  ctx: RepoContext,
  items: readonly PreparedWrite[],
): Promise<void> {
  const byProject = new Map<string, PreparedWrite[]>();
  for (const it of items) byProject.set(it.projectId, [...(byProject.get(it.projectId) ?? []), it]);
  for (const [projectId, list] of byProject) {
    const defined = list.map((it) => readSearchParameter(it.resource));
    await lockProject(db, projectId);
    const others = await othersOf(
      db,
      projectId,
      list.map((it) => it.resource.id as string),
    );
    if (others.length + list.length > MAX_PROJECT_SEARCH_PARAMETERS) {
      throw new FhirError(
        'business-rule',
        `A project holds at most ${MAX_PROJECT_SEARCH_PARAMETERS} active SearchParameters`,
        'search-parameter.limit',
        { status: 422 },
      );
    }
    const bases = new Set<string>();
    for (const params of defined) {
      for (const p of params) {
        if ((await ctx.searchParams?.shared())?.some((s) => s.code === p.code && s.base === p.base)) {
          throw taken(p.code, `a search parameter of ${p.base} shared by every project`, 'code-shared');
        }
        if (
          others.some((o) => o.code === p.code && o.base.includes(p.base)) ||
          bases.has(`${p.base}.${p.code}`)
        ) {
          throw taken(p.code, `an active SearchParameter of this project for ${p.base}`, 'code-taken');
        }
        bases.add(`${p.base}.${p.code}`);
      }
    }
    const types = [...new Set(defined.flat().map((p) => p.base))];
    // Resources stored before them are indexed by this job (API.md §9): an AsyncJob of the project, which its admins
    // can read and cancel. Created in the write's transaction: no stored parameter without its job.
    await createJob(db, ctx, {
      kind: 'reindex',
      params: { types, projectId },
      projectId,
      request: requestOf(
        ctx.fhirBase,
        list.map((it) => it.resource.id as string),
      ),
      ...(ctx.author ? { owner: ctx.author } : {}),
    });
  }
}
