// The parameters of `$viewdefinition-run` and `$viewdefinition-export` (API.md §7; SQL on FHIR v2 operations,
// https://sql-on-fhir.org/ig/operations.html): a Parameters body (or the query string for GET), the view given
// inline (`viewResource`) or by reference (`viewReference`: `ViewDefinition/<id>` or the view's canonical `url`),
// read with the caller's access.
import type { Queryable } from '../../storage/db.js';
import { parseJson } from '../json/parse.js';
import { FhirError } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import { readVisibleRow } from '../repository/read.js';
import { assertRead, searchScope } from '../access.js';
import { executeSearch } from '../search/execute.js';
import { parseSearchRequest } from '../search/parse.js';
import { assertDepth, MAX_RESOURCE_DEPTH } from '../validation/depth.js';
import type { AsyncRequest } from './async-start.js';
import { MAX_PATIENT_PARAMS } from './export-params.js';
import { parametersOf, type ParameterJson } from './parameters-body.js';

export type Json = Record<string, unknown>;

const bad = (message: string, code: string): FhirError => new FhirError('invalid', message, `views.${code}`);

/** One `parameter` of a Parameters body (or a query value, as `valueString`). */
export interface Param {
  name: string;
  value?: unknown;
  resource?: Json;
  part?: Param[];
}

const valueOf = (p: ParameterJson): unknown => {
  const key = Object.keys(p).find((k) => k.startsWith('value'));
  return key ? p[key] : undefined;
};

function toParam(p: ParameterJson): Param {
  const out: Param = { name: p.name, value: valueOf(p) };
  if (p.resource) out.resource = p.resource;
  if (p.part) out.part = p.part.map(toParam);
  return out;
}

/** Every parameter, from the query string and a Parameters body (400 for a body of another shape). */
export function viewParams(req: AsyncRequest): Param[] {
  const out: Param[] = [];
  for (const [name, v] of Object.entries(req.query))
    for (const value of [v].flat()) out.push({ name, value });
  for (const p of parametersOf(req.body, 'views.body')) out.push(toParam(p));
  return out;
}

export const named = (params: readonly Param[], name: string): Param[] =>
  params.filter((p) => p.name === name);

/** The single value of a parameter given at most once, or undefined. */
export function single(params: readonly Param[], name: string): unknown {
  const found = named(params, name);
  if (found.length > 1) throw bad(`The parameter ${name} may be given once`, 'repeated');
  return found[0]?.value;
}

/** A reference given as `valueReference`, a canonical/uri/string value, or a query value. */
function referenceText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  const ref = (value as { reference?: unknown } | undefined)?.reference;
  return typeof ref === 'string' ? ref : undefined;
}

/**
 * The view of `viewResource` xor `viewReference` (in `params`, the top level or one `view` part), read with the
 * caller's access: another project's view, or a missing one, is 404.
 */
export async function resolveView(db: Queryable, ctx: RepoContext, params: readonly Param[]): Promise<Json> {
  const inline = named(params, 'viewResource');
  const refs = named(params, 'viewReference');
  if (inline.length + refs.length !== 1) {
    throw bad('Give exactly one of viewResource and viewReference', 'view-choice');
  }
  const view = inline[0]?.resource;
  if (inline.length === 1) {
    // A view without `resourceType` is taken as one (the specification's own test views are written so).
    if (!view || (view.resourceType !== undefined && view.resourceType !== 'ViewDefinition'))
      throw bad('viewResource must hold a ViewDefinition resource', 'view-resource');
    // A view is a resource: it nests no deeper than one may be stored, before compileView walks it (issue 25).
    assertDepth(view, MAX_RESOURCE_DEPTH, 'viewResource', 'views.too-deep');
    return view;
  }
  const text = referenceText(refs[0]?.value);
  if (!text) throw bad('viewReference must be a Reference or the canonical URL of a view', 'view-reference');
  // `ViewDefinition/<id>`, relative or under this server's base.
  const relative = text.startsWith(`${ctx.fhirBase}/`) ? text.slice(ctx.fhirBase.length + 1) : text;
  const local = /^ViewDefinition\/([A-Za-z0-9\-.]{1,64})$/.exec(relative);
  if (local) return readStoredView(db, ctx, local[1] as string);
  assertRead(ctx.actor, 'ViewDefinition', 'search');
  // A canonical URL: the caller's view with that url (the latest written, when several).
  const scope = searchScope(ctx.actor, ctx.author, 'ViewDefinition', ctx.scope);
  const found = await executeSearch(
    db,
    { ...parseSearchRequest('ViewDefinition', { url: text, _sort: '-_lastUpdated' }), count: 1 },
    scope,
  );
  const match = found.matches[0];
  if (!match) throw viewNotFound(text);
  return parseJson(match.json) as Json;
}

const viewNotFound = (what: string): FhirError =>
  new FhirError('not-found', `ViewDefinition not found: ${what.slice(0, 200)}`, 'views.not-found');

/** A stored view by id, read with the caller's access (404 when missing, deleted or another project's). */
export async function readStoredView(db: Queryable, ctx: RepoContext, id: string): Promise<Json> {
  assertRead(ctx.actor, 'ViewDefinition');
  const row = await readVisibleRow(db, ctx, 'ViewDefinition', id);
  if (!row || row.deleted) throw viewNotFound(`ViewDefinition/${id}`);
  return parseJson(row.json) as Json;
}

export type ViewFormat = 'json' | 'ndjson' | 'csv' | 'parquet';

const FORMATS: Record<string, ViewFormat> = {
  json: 'json',
  'application/json': 'json',
  'application/fhir+json': 'json',
  ndjson: 'ndjson',
  'application/x-ndjson': 'ndjson',
  'application/ndjson': 'ndjson',
  'application/fhir+ndjson': 'ndjson',
  csv: 'csv',
  'text/csv': 'csv',
  parquet: 'parquet',
  'application/vnd.apache.parquet': 'parquet',
  'application/parquet': 'parquet',
};

/** `_format` (a name or a MIME type), else what `accept` asks for, else `dflt`; `allowed` narrows it. */
export function viewFormat<F extends ViewFormat>(
  value: unknown,
  accept: string | undefined,
  allowed: readonly F[],
  dflt: F,
): F {
  const known = (text: string): F | undefined => {
    const f = FORMATS[text.split(';')[0]?.trim().toLowerCase() ?? ''];
    return f !== undefined && (allowed as readonly ViewFormat[]).includes(f) ? (f as F) : undefined;
  };
  if (value !== undefined) {
    const f = known(String(value));
    if (!f) throw bad(`Unsupported _format: ${String(value).slice(0, 64)} (${allowed.join(', ')})`, 'format');
    return f;
  }
  for (const part of (accept ?? '').split(',')) {
    const f = known(part);
    if (f) return f;
  }
  return dflt;
}

/** A boolean parameter (`header`), given as valueBoolean or the text true/false. */
export function booleanParam(value: unknown, name: string, dflt: boolean): boolean {
  if (value === undefined) return dflt;
  if (value === true || value === 'true') return true;
  if (value === false || value === 'false') return false;
  throw bad(`${name} must be true or false`, 'boolean');
}

/** `_limit`: a positive integer, at most `max` (its default). */
export function limitParam(value: unknown, max: number): number {
  if (value === undefined) return max;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw bad(`_limit must be a positive integer: ${String(value).slice(0, 32)}`, 'limit');
  return Math.min(n, max);
}

/** `patient` references (`Patient/<id>`) and the `group` id, from Reference values or query text. */
export function compartmentParams(params: readonly Param[]): { patients: string[]; group?: string } {
  const id =
    (name: string, type: string) =>
    (p: Param): string => {
      const text = referenceText(p.value) ?? '';
      const m = new RegExp(`^${type}/([A-Za-z0-9\\-.]{1,64})$`).exec(text);
      if (!m) throw bad(`${name} must reference ${type}/<id>: ${text.slice(0, 80)}`, name);
      return m[1] as string;
    };
  const patients = [...new Set(named(params, 'patient').map(id('patient', 'Patient')))];
  if (patients.length > MAX_PATIENT_PARAMS)
    throw bad(`Too many patient parameters: at most ${MAX_PATIENT_PARAMS}`, 'patient-count');
  const groups = named(params, 'group').map(id('group', 'Group'));
  if (groups.length > 1) throw bad('At most one group may be given', 'group');
  return { patients, ...(groups[0] ? { group: groups[0] } : {}) };
}
