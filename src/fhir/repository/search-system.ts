// search (system level, `GET {fhir}?_type=…` and `POST {fhir}/_search`): https://hl7.org/fhir/R4/http.html#search
// The query is parsed for each type searched (so a parameter must be defined for every one of them) and answered by one
// SQL query over the resources table: types whose parse is the same share one condition (search/sql.ts).
import type { Queryable } from '../../storage/db.js';
import { assertChainsReadable, searchScope } from '../access.js';
import { FhirError } from '../outcome.js';
import type { FhirResult } from '../result.js';
import { executeSearch } from '../search/execute.js';
import { FULL_TEXT_PARAMS, supportsFullText } from '../search/full-text.js';
import { isResourceType, resourceTypes } from '../search/model.js';
import type { IncludeSpec, SearchRequest } from '../search/request.js';
import { resolveTerminology } from '../search/terminology.js';
import type { AccessScope } from '../types.js';
import { AUDIT_EVENT } from './audit-events.js';
import type { RepoContext } from './context.js';
import { parseProjectSearch } from './custom-index.js';
import { chainedTypes, countLimit, searchsetBundle } from './search.js';

/** Most types one `_type` may list. */
export const MAX_SYSTEM_TYPES = 50;

const bad = (message: string, code: string): FhirError =>
  new FhirError('invalid', message, `search.system-${code}`);

/** The types `_type` names (comma-separated, repeatable), or undefined when absent. */
function typesOf(raw: string | string[] | undefined): string[] | undefined {
  if (raw === undefined) return undefined;
  const types = [...new Set([raw].flat().flatMap((v) => v.split(',').map((t) => t.trim())))].filter(Boolean);
  if (types.length === 0) throw bad('_type names no resource type', 'empty-type');
  if (types.length > MAX_SYSTEM_TYPES)
    throw bad(`_type names ${types.length} types (at most ${MAX_SYSTEM_TYPES})`, 'too-many-types');
  for (const t of types) {
    if (!isResourceType(t)) throw bad(`Unknown resource type '${t.slice(0, 64)}' in _type`, 'unknown-type');
    // The audit trail is not in the resources table (API.md §10): it is searched at GET AuditEvent only.
    if (t === AUDIT_EVENT)
      throw new FhirError(
        'not-supported',
        'AuditEvent cannot be searched at system level; search GET AuditEvent',
        'search.system-audit-event',
      );
  }
  return types;
}

/**
 * What the caller may see across `types`: the project (and patient) of its context, with the narrowing that searching
 * AsyncJob (the jobs it started) or ProjectMembership (its own) brings for those types. Named types the caller may
 * not search are a 403; without `_type`, such types are left out.
 */
function systemScope(
  ctx: RepoContext,
  types: string[],
  named: boolean,
): { scope: AccessScope; types: string[] } {
  let scope: AccessScope = ctx.scope;
  const kept: string[] = [];
  for (const t of types) {
    let s: AccessScope;
    try {
      s = searchScope(ctx.actor, ctx.author, t, ctx.scope);
    } catch (err) {
      if (named || !(err instanceof FhirError)) throw err;
      continue;
    }
    if (s.author !== undefined) scope = { ...scope, author: s.author };
    if (s.membership !== undefined) scope = { ...scope, membership: s.membership };
    kept.push(t);
  }
  return { scope, types: kept };
}

const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

function union(lists: IncludeSpec[][]): IncludeSpec[] {
  const out: IncludeSpec[] = [];
  for (const spec of lists.flat()) if (!out.some((o) => same(o, spec))) out.push(spec);
  return out;
}

export async function searchSystem(
  db: Queryable,
  ctx: RepoContext,
  query: Record<string, string | string[] | undefined>,
  selfUrl: string,
): Promise<FhirResult> {
  const named = typesOf(query._type);
  const rest = { ...query };
  delete rest._type;
  // Without _type, `_text` leaves out the types that have no narrative (Binary, Bundle, Parameters).
  const fullText = [...FULL_TEXT_PARAMS].filter((code) =>
    Object.keys(rest).some((k) => k.split(':')[0] === code),
  );
  const all =
    named ??
    [...resourceTypes()]
      .filter((t) => t !== AUDIT_EVENT && fullText.every((code) => supportsFullText(t, code)))
      .sort();
  const { scope, types } = systemScope(ctx, all, named !== undefined);
  if (types.length === 0)
    throw new FhirError(
      'forbidden',
      'Forbidden: the caller may search no resource type',
      'search.system-none',
    );
  const parsed: SearchRequest[] = [];
  for (const t of types) {
    let req: SearchRequest;
    try {
      req = await parseProjectSearch(db, ctx, t, rest, { terminology: true, filter: true });
    } catch (err) {
      if (!named && err instanceof FhirError && err.code === 'search.unknown-param') {
        throw bad(
          `${err.message}: without _type, a system search takes only the parameters of every resource type ` +
            '(_id, _lastUpdated, _tag, _profile, _security, _source, _text, _content); name the types in _type to use others',
          'not-common',
        );
      }
      throw err;
    }
    assertChainsReadable(ctx.actor, chainedTypes(req));
    parsed.push(
      await resolveTerminology(req, ctx.conformance?.terminology, { projectId: ctx.actor.projectId, db }),
    );
  }
  const first = parsed[0] as SearchRequest;
  const groups: NonNullable<SearchRequest['system']> = [];
  parsed.forEach((p, i) => {
    if (!same(p.sort, first.sort))
      throw bad(`_sort means different things for ${types[0]} and ${types[i]}`, 'sort-differs');
    const group = groups.find((g) => same(g.filters, p.filters));
    if (group) group.types.push(types[i] as string);
    else groups.push({ types: [types[i] as string], filters: p.filters });
  });
  const req: SearchRequest = {
    ...first,
    filters: [],
    include: union(parsed.map((p) => p.include)),
    revinclude: union(parsed.map((p) => p.revinclude)),
    system: groups,
  };
  const result = await executeSearch(db, req, scope, countLimit(ctx));
  return searchsetBundle(ctx, req, result, selfUrl, { paged: Boolean(req.cursor || req.offset) });
}
