// Bulk Data kick-off headers and parameters (https://hl7.org/fhir/uv/bulkdata/export.html#bulk-data-kick-off-request,
// STU2 "Headers" and "Query Parameters"): each checked here into the plain values an export job stores, or a 400.
// Unknown parameters answer 400 under `Prefer: handling=strict` and are otherwise ignored with a warning that the job
// writes to its error file (the IG's `error` array of the manifest).
import type { Actor } from '../access.js';
import { assertChainsReadable, canRead } from '../access.js';
import { isResourceType, structureNode } from '../definitions/index.js';
import { FhirError } from '../outcome.js';
import { parseSearchRequest, RESULT_PARAMETERS, type SearchRequest } from '../search/parse.js';
import type { AsyncRequest } from './async-start.js';

/** Parameters of the three export OperationDefinitions (STU2), `_fields` of the CSV export, and FHIR's `_format`. */
const KNOWN = new Set([
  '_outputFormat',
  '_since',
  '_type',
  '_typeFilter',
  '_elements',
  'patient',
  'includeAssociatedData',
  '_fields',
  '_format',
  '_pretty',
]);

/** At most this many `patient` references per kick-off: each is read to check that the caller may see it. */
export const MAX_PATIENT_PARAMS = 1000;

const bad = (message: string, code: string): FhirError => new FhirError('invalid', message, `export.${code}`);

/**
 * `Accept`: the IG supports only `application/fhir+json` for the kick-off's OperationOutcome and lists the header as
 * required; the Bulk Data Tester expects a kick-off without it to be refused (its HTTP library then sends
 * `application/json`), so a missing header is a 400, and so is `application/json`. Ranges that include FHIR JSON
 * (`*\/*`, which curl and fetch send, and `application/*`) are accepted. The SMART bulk-data-client and BDT send
 * `application/fhir+json`. Anything else (`application/fhir+xml`, `text/html`) is 400 too.
 */
export function assertAccept(accept: string | undefined): void {
  if (accept === undefined || accept.trim() === '')
    throw bad('A bulk export kick-off needs the header Accept: application/fhir+json', 'accept-missing');
  const ok = new Set(['application/fhir+json', 'application/*', '*/*']);
  const ranges = accept.split(',').map((r) => {
    const [type = '', ...params] = r.split(';').map((x) => x.trim().toLowerCase());
    const q = params.find((x) => x.startsWith('q='));
    return { type, q: q ? Number(q.slice(2)) : 1 };
  });
  if (ranges.some((r) => ok.has(r.type) && r.q > 0)) return;
  throw bad(
    `Unsupported Accept: ${accept.slice(0, 100)}; a bulk export kick-off answers application/fhir+json`,
    'accept',
  );
}

/** `Prefer: handling=strict|lenient` (https://hl7.org/fhir/R4/http.html#prefer), or undefined. */
export function handling(prefer: string | undefined): 'strict' | 'lenient' | undefined {
  const m = /(?:^|[,;\s])handling\s*=\s*"?(strict|lenient)"?(?:$|[,;\s])/i.exec(prefer ?? '');
  return m ? (m[1]?.toLowerCase() as 'strict' | 'lenient') : undefined;
}

/** Collects warnings (ignored parameters), or throws them as a 400 under `handling=strict`. */
export class KickOffNotes {
  readonly warnings: string[] = [];
  constructor(readonly handling: 'strict' | 'lenient' | undefined) {}

  warn(text: string, code: string): void {
    if (this.handling === 'strict') throw bad(`${text} (Prefer: handling=strict)`, code);
    this.warnings.push(text);
  }
}

export function warnUnknown(p: Record<string, string[]>, csv: boolean, notes: KickOffNotes): void {
  for (const name of Object.keys(p)) {
    if (!KNOWN.has(name))
      notes.warn(`Unknown parameter ${name.slice(0, 64)} was ignored`, 'unknown-parameter');
    else if (name === '_fields' && !csv)
      notes.warn('_fields applies to _outputFormat=text/csv only and was ignored', 'fields-ignored');
  }
}

/** Comma lists given once or repeated are one list (the IG: repeated values are as if comma-delimited). */
export function list(values: string[] | undefined): string[] {
  return [...new Set((values ?? []).flatMap((v) => v.split(',')).map((x) => x.trim()))].filter(Boolean);
}

/** `_since`: an instant, not in the future (there is nothing to export after now). */
export function since(values: string[] | undefined, now: Date): string | null {
  const v = values?.[0];
  if (v === undefined) return null;
  const ms = /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2}))?$/.test(v) ? Date.parse(v) : NaN;
  if (Number.isNaN(ms)) throw bad(`Invalid _since: ${v.slice(0, 64)}`, 'since');
  if (ms > now.getTime()) throw bad(`_since is in the future: ${v.slice(0, 64)}`, 'since-future');
  return new Date(ms).toISOString();
}

/** `patient` references (`Patient/<id>`), from Parameters `valueReference` (or a string in the query). */
export function patientRefs(req: AsyncRequest, p: Record<string, string[]>): string[] {
  const body = req.body as { parameter?: unknown } | undefined;
  const refs = [...list(p.patient)];
  if (body && Array.isArray(body.parameter)) {
    for (const x of body.parameter as { name?: unknown; valueReference?: { reference?: unknown } }[]) {
      if (x?.name !== 'patient') continue;
      const ref = x.valueReference?.reference;
      if (typeof ref !== 'string') throw bad('A patient parameter needs valueReference.reference', 'patient');
      refs.push(ref);
    }
  }
  if (refs.length > MAX_PATIENT_PARAMS)
    throw bad(`Too many patient parameters: at most ${MAX_PATIENT_PARAMS}`, 'patient-count');
  return [
    ...new Set(
      refs.map((r) => {
        const m = /^Patient\/([A-Za-z0-9\-.]{1,64})$/.exec(r);
        if (!m) throw bad(`A patient parameter must reference Patient/<id>: ${r.slice(0, 80)}`, 'patient');
        return m[1] as string;
      }),
    ),
  ];
}

/**
 * `_typeFilter`: `Type?query` values. The IG joins several with commas, so a value is split where a comma is followed
 * by `Type?`; a comma elsewhere (`code=a,b`) stays in its query. Each query is parsed by the search parser (every
 * search parameter, the search limits) and its chains must be readable; the text after `?` is kept per type.
 */
export function typeFilters(
  values: string[] | undefined,
  actor: Actor,
  notes?: KickOffNotes,
): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  const queries = (values ?? []).flatMap((v) => v.split(/,(?=[A-Z][A-Za-z]{0,63}\?)/)).map((q) => q.trim());
  for (const q of queries.filter(Boolean)) {
    try {
      typeFilter(q, actor, out);
    } catch (err) {
      // Under `Prefer: handling=lenient` a filter Cinder cannot apply is left out with a warning (the IG; BDT).
      if (!(err instanceof FhirError) || notes?.handling !== 'lenient') throw err;
      notes.warn(`${err.message}; the filter was ignored`, 'type-filter-ignored');
    }
  }
  return out;
}

/** One `_typeFilter` query `Type?query`, checked, added to `out`. */
function typeFilter(q: string, actor: Actor, out: Record<string, string[]>): void {
  const m = /^([A-Z][A-Za-z]{0,63})\?(.*)$/s.exec(q);
  if (!m || !isResourceType(m[1] as string))
    throw bad(`Invalid _typeFilter (expected Type?query): ${q.slice(0, 100)}`, 'type-filter');
  const [, type = '', query = ''] = m;
  if (!canRead(actor, type))
    throw bad(`_typeFilter names a type the caller may not read: ${type}`, 'type-filter-type');
  const req = parseTypeFilter(type, query);
  assertChainsReadable(
    actor,
    req.filters.flatMap((f) => (f.chain ? [f.chain.targetType] : [])),
  );
  (out[type] ??= []).push(query);
}

/** One `_typeFilter` query (the text after `?`) as a SearchRequest; a result parameter or a bad query is a 400. */
export function parseTypeFilter(type: string, query: string): SearchRequest {
  // `+` stays a plus (a time zone offset), as in an already-decoded value.
  const params = new URLSearchParams(query.replace(/\+/g, '%2B'));
  const q: Record<string, string[]> = {};
  for (const [k, v] of params) {
    if (RESULT_PARAMETERS.has(k.split(':')[0] as string))
      throw bad(`_typeFilter must not use the result parameter ${k.slice(0, 64)}`, 'type-filter-result');
    (q[k] ??= []).push(v);
  }
  if (Object.keys(q).length === 0) throw bad(`_typeFilter ${type}? has no criteria`, 'type-filter-empty');
  try {
    return parseSearchRequest(type, q);
  } catch (err) {
    if (err instanceof FhirError)
      throw new FhirError(
        err.issueCode,
        `Invalid _typeFilter ${type}?${query.slice(0, 100)}: ${err.message}`,
        err.code,
        {
          status: err.status,
        },
      );
    throw err;
  }
}

/** `_elements`: bare names apply to every type, `Type.name` to one; only root elements (the IG). */
export interface ElementsParam {
  all: string[];
  byType: Record<string, string[]>;
}

export function elementsParam(values: string[] | undefined): ElementsParam | undefined {
  const items = list(values);
  if (items.length === 0) return undefined;
  const out: ElementsParam = { all: [], byType: {} };
  for (const item of items) {
    const m = /^(?:([A-Z][A-Za-z]{0,63})\.)?([a-z][A-Za-z0-9]{0,63})$/.exec(item);
    if (!m) throw bad(`Invalid _elements entry (Type.element or element): ${item.slice(0, 80)}`, 'elements');
    const [, type, name = ''] = m;
    if (type !== undefined) {
      if (!structureNode(type)?.isResource || !isResourceType(type))
        throw bad(`Unknown resource type in _elements: ${type}`, 'elements-type');
      if (!structureNode(type)?.elements.has(name))
        throw bad(`${type} has no element ${name} (_elements)`, 'elements-element');
      (out.byType[type] ??= []).push(name);
    } else out.all.push(name);
  }
  return out;
}

/**
 * `includeAssociatedData`: Cinder keeps no Provenance of its own and does not look up the Provenance of exported
 * resources, so no value is supported. The parameter is optional, so (like an unknown parameter) it is ignored with a
 * warning in the job's error file, and refused under `Prefer: handling=strict` (BDT expects such exports to start). A
 * Provenance stored as a resource is exported like any other type.
 */
export function includeAssociatedData(values: string[] | undefined, notes: KickOffNotes): void {
  for (const v of list(values))
    notes.warn(`includeAssociatedData=${v.slice(0, 64)} is not supported and was ignored`, 'associated-data');
}
