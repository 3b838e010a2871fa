// `_summary`: a resource cut down to its summary elements (`true`), its narrative with the mandatory elements
// (`text`), or everything but the narrative (`data`), marked SUBSETTED. The summary flags are the base
// definitions' `isSummary`. https://hl7.org/fhir/R4/search.html#summary
import { structureNode, type StructureNode } from '../definitions/index.js';
import { parseJson } from '../json/parse.js';
import { copyRawNumbers } from '../json/raw-numbers.js';
import { FhirError } from '../outcome.js';
import { RawJson, StreamedJson, type FhirResult } from '../result.js';
import { applyElements, markSubsetted } from './elements.js';
import { parseSearchRequest } from './parse.js';

export type SummaryMode = 'true' | 'text' | 'data';

const ALWAYS = new Set(['resourceType', 'id', 'meta']);

type Json = Record<string, unknown>;

/** The JSON property's element in `node` (`_birthDate` is birthDate's extension part). */
const childOf = (node: StructureNode, key: string) => node.json.get(key.startsWith('_') ? key.slice(1) : key);

/** Summary elements of an object of `node`, recursing into backbone elements (datatypes are kept whole). */
function summaryOf(obj: Json, node: StructureNode): Json {
  const out: Json = {};
  for (const [key, value] of Object.entries(obj)) {
    const child = childOf(node, key);
    if (!ALWAYS.has(key) && !child?.element.isSummary) continue;
    const sub = child?.node;
    if (sub && sub.path.includes('.') && value && typeof value === 'object') {
      out[key] = Array.isArray(value)
        ? value.map((v) => (v && typeof v === 'object' ? summaryOf(v as Json, sub) : v))
        : summaryOf(value as Json, sub);
    } else out[key] = value;
  }
  copyRawNumbers(obj, out);
  return out;
}

/** The resource JSON text in the `_summary` form asked; `false` (or no mode) leaves it as it is. */
export function applySummary(json: string, mode: string | undefined): string {
  if (mode !== 'true' && mode !== 'text' && mode !== 'data') return json;
  const resource = parseJson(json) as Json;
  const node = structureNode(String(resource.resourceType));
  if (!node) return json;
  let out: Json;
  if (mode === 'data') {
    out = { ...resource };
    delete out.text;
  } else if (mode === 'text') {
    out = {};
    for (const [key, value] of Object.entries(resource)) {
      const child = childOf(node, key);
      if (ALWAYS.has(key) || key === 'text' || (child && child.element.min >= 1)) out[key] = value;
    }
  } else out = summaryOf(resource, node);
  return markSubsetted(out, resource);
}

/**
 * `_summary` and `_elements` on a read or vread (https://hl7.org/fhir/R4/search.html#summary applies to reads too):
 * the read's JSON cut down as a search entry would be. An invalid value is a 400, as in a search.
 */
export function subsetRead(
  result: FhirResult,
  resourceType: string,
  query: Record<string, string | string[] | undefined>,
): FhirResult {
  const summary = query._summary;
  const elements = query._elements;
  const body = result.body;
  if (summary === undefined && elements === undefined) return result;
  if (!(body instanceof RawJson) && !(body instanceof StreamedJson)) return result;
  const req = parseSearchRequest(resourceType, {
    ...(summary !== undefined ? { _summary: summary } : {}),
    ...(elements !== undefined ? { _elements: elements } : {}),
  });
  if (req.summary === 'count') {
    throw new FhirError(
      'invalid',
      '_summary=count applies to searches, not to a read',
      'rest.read.summary-count',
    );
  }
  const cut = (json: string): string =>
    req.elements?.length ? applyElements(json, req.elements) : applySummary(json, req.summary);
  // A Binary's JSON with its content streamed (binary-content.ts): cut around the content.
  if (body instanceof StreamedJson) return { ...result, body: body.subset(cut) };
  const text = cut(body.text);
  return text === body.text ? result : { ...result, body: new RawJson(text) };
}
