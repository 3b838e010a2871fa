// Conditional references (https://hl7.org/fhir/R4/http.html#trules): a `reference` written as a search
// (`Patient?identifier=http://hospital.org/mrn|123`) is replaced by `<Type>/<id>` of the one resource it finds.
import type { Queryable } from '../../storage/db.js';
import { assertChainsReadable, searchScope } from '../access.js';
import { isResourceType } from '../definitions/index.js';
import { FhirError } from '../outcome.js';
import { executeSearch } from '../search/execute.js';
import type { RepoContext } from './context.js';
import { parseProjectSearch } from './custom-index.js';
import { chainedTypes } from './search.js';

/** Longer search references are refused (400): a reference names a resource, it does not carry data. */
export const MAX_CONDITIONAL_REFERENCE = 4096;

/**
 * Parameters that control what a search returns rather than what it matches: R4 allows only filtering parameters in
 * a conditional reference, and a count or sort would change whether "exactly one" holds.
 */
const RESULT_PARAMS = new Set([
  '_count',
  '_offset',
  '_cursor',
  '_sort',
  '_include',
  '_revinclude',
  '_summary',
  '_elements',
  '_total',
  '_contained',
  '_containedType',
  '_format',
  '_pretty',
]);

/** A search a reference names: its type, its parameters, and a key equal for the same search however written. */
export interface ReferenceSearch {
  type: string;
  params: [string, string][];
  key: string;
}

const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;

/** Whether a `reference` value is (or tries to be) a search of this server: what referenceSearch reads or refuses. */
const searchLike = (ref: string, fhirBase: string): boolean =>
  ref.includes('?') && !ref.startsWith('#') && (ref.startsWith(`${fhirBase}/`) || !SCHEME.test(ref));

const malformed = (ref: string, why: string, path: string): FhirError =>
  new FhirError('invalid', `Conditional reference ${clip(ref)}: ${why}`, 'txref.malformed', {
    expression: [path],
  });

const clip = (s: string): string => (s.length > 120 ? `${s.slice(0, 120)}…` : s);

/** The canonical key of a search: the type and its (decoded) parameters in a stable order. */
function searchKey(type: string, params: readonly [string, string][]): string {
  const sorted = [...params].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : 1));
  return `${type}?${new URLSearchParams(sorted).toString()}`;
}

/** The search `type` + `query` (a conditional create's If-None-Exist, a conditional update's url) stands for. */
export function criteriaKey(type: string, query: string): string {
  const q = query.startsWith(`${type}?`) ? query.slice(type.length + 1) : query;
  return searchKey(type, [...new URLSearchParams(q)]);
}

/**
 * The search a `reference` value names, or undefined when it is not one: local (`#id`) references, `Type/id`, and
 * absolute URLs of other servers or other schemes (`urn:uuid:`) are left alone; this server's own base is stripped.
 * A reference with a query that does not start with a resource type, or an empty or result-controlling query, is 400.
 */
export function referenceSearch(ref: string, fhirBase: string, path: string): ReferenceSearch | undefined {
  if (!searchLike(ref, fhirBase)) return undefined;
  const rel = ref.startsWith(`${fhirBase}/`) ? ref.slice(fhirBase.length + 1) : ref;
  if (ref.length > MAX_CONDITIONAL_REFERENCE)
    throw new FhirError(
      'too-long',
      `Conditional reference ${clip(ref)}: longer than ${MAX_CONDITIONAL_REFERENCE} characters`,
      'txref.too-long',
      { status: 400, expression: [path] },
    );
  const at = rel.indexOf('?');
  const type = rel.slice(0, at);
  if (!isResourceType(type)) throw malformed(ref, 'a search reference must start with a resource type', path);
  const params = [...new URLSearchParams(rel.slice(at + 1))];
  if (params.length === 0) throw malformed(ref, 'the search is empty', path);
  for (const [k] of params) {
    const base = k.split(':')[0] ?? k;
    if (RESULT_PARAMS.has(base))
      throw malformed(ref, `${base.slice(0, 40)} is not a filtering parameter`, path);
  }
  return { type, params, key: searchKey(type, params) };
}

/** Every search reference in `value` (a resource), each with where it is, in document order. */
function collect(
  value: unknown,
  path: string,
  fhirBase: string,
  out: { owner: Record<string, unknown>; search: ReferenceSearch; ref: string; path: string }[],
): void {
  if (Array.isArray(value)) {
    value.forEach((v, i) => collect(v, `${path}[${i}]`, fhirBase, out));
  } else if (value && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    for (const [k, v] of Object.entries(obj)) {
      if (k === 'reference' && typeof v === 'string') {
        const search = referenceSearch(v, fhirBase, path);
        if (search) out.push({ owner: obj, search, ref: v, path });
      } else if (typeof v === 'object' && v !== null) {
        collect(v, `${path}.${k}`, fhirBase, out);
      }
    }
  }
}

/** Whether a resource holds a search reference (malformed ones included: they fail when resolved). */
export function hasConditionalReference(value: unknown, fhirBase: string): boolean {
  if (Array.isArray(value)) return value.some((v) => hasConditionalReference(v, fhirBase));
  if (!value || typeof value !== 'object') return false;
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (k === 'reference' && typeof v === 'string') {
      if (searchLike(v, fhirBase)) return true;
    } else if (typeof v === 'object' && v !== null && hasConditionalReference(v, fhirBase)) return true;
  }
  return false;
}

type Outcome = { target: string } | { error: FhirError };

/**
 * Resolves the search references of the resources of one Bundle. Each distinct search runs once (bundles repeat the
 * same practitioner or organization on every entry), with the caller's read access, over what the database holds
 * through `db` at that moment; `alias` lets a search equal to a conditional create's or update's criteria name the
 * resource that entry writes without a search.
 */
export class ConditionalReferences {
  private readonly known = new Map<string, Outcome>();

  constructor(private readonly ctx: RepoContext) {}

  alias(type: string, query: string, target: string): void {
    this.known.set(criteriaKey(type, query), { target });
  }

  /** Replaces each search reference of `resource` in place by `<Type>/<id>`; throws 400, 403 or 412 otherwise. */
  async resolve(db: Queryable, resource: { resourceType: string }): Promise<void> {
    if (!hasConditionalReference(resource, this.ctx.fhirBase)) return;
    const found: Parameters<typeof collect>[3] = [];
    collect(resource, resource.resourceType, this.ctx.fhirBase, found);
    for (const f of found) {
      let outcome = this.known.get(f.search.key);
      if (!outcome) {
        outcome = await this.search(db, f.search, f.ref, f.path).then(
          (target): Outcome => ({ target }),
          (err: unknown): Outcome => {
            if (err instanceof FhirError) return { error: err };
            throw err;
          },
        );
        this.known.set(f.search.key, outcome);
      }
      if ('error' in outcome) throw outcome.error;
      f.owner.reference = outcome.target;
    }
  }

  private async search(db: Queryable, s: ReferenceSearch, ref: string, path: string): Promise<string> {
    const ctx = this.ctx;
    if (s.type === 'AuditEvent')
      throw new FhirError(
        'not-supported',
        `Conditional reference ${clip(ref)}: AuditEvents cannot be found by a conditional reference`,
        'txref.audit',
        { expression: [path] },
      );
    // The caller's own search: its project, its scopes (403 when it may not search the type), its chain rules.
    const scope = searchScope(ctx.actor, ctx.author, s.type, ctx.scope);
    const query: Record<string, string[]> = {};
    for (const [k, v] of s.params) (query[k] ??= []).push(v);
    const req = await parseProjectSearch(db, ctx, s.type, { ...query, _count: '2' }).catch((err: unknown) => {
      if (!(err instanceof FhirError)) throw err;
      // The search's own complaint (unknown parameter, bad value), named after the reference that holds it.
      throw new FhirError(err.issueCode, `Conditional reference ${clip(ref)}: ${err.message}`, err.code, {
        status: err.status,
        expression: [path],
      });
    });
    assertChainsReadable(ctx.actor, chainedTypes(req));
    const { matches } = await executeSearch(db, req, scope);
    const hit = matches[0];
    if (matches.length > 1)
      throw new FhirError(
        'multiple-matches',
        `Conditional reference ${clip(ref)} matched more than one resource`,
        'txref.multiple',
        { expression: [path] },
      );
    if (!hit)
      throw new FhirError(
        'not-found',
        `Conditional reference ${clip(ref)} matched no resource`,
        'txref.none',
        {
          status: 412,
          expression: [path],
        },
      );
    return `${hit.resourceType}/${hit.id}`;
  }
}
