// `_elements`: a resource cut down to the listed top-level elements, marked SUBSETTED.
// https://hl7.org/fhir/R4/search.html#elements
import { parseJson } from '../json/parse.js';
import { copyRawNumbers } from '../json/raw-numbers.js';
import { stringifyJson } from '../json/stringify.js';
import { elementInfo } from './model.js';

export const SUBSETTED = {
  system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue',
  code: 'SUBSETTED',
};

const ALWAYS = new Set(['resourceType', 'id', 'meta']);

/**
 * Keeps resourceType, id, meta and the listed top-level elements (a choice element `value` keeps `valueQuantity`
 * etc., and primitives keep their `_name` extensions), and adds the SUBSETTED tag once.
 */
export function applyElements(json: string, elements: readonly string[]): string {
  const resource = parseJson(json) as Record<string, unknown>;
  const type = String(resource.resourceType);
  const wanted = new Set(elements);
  const choiceNames = elements.filter((e) => elementInfo(type, e)?.choice);
  const keep = (key: string): boolean => {
    const k = key.startsWith('_') ? key.slice(1) : key;
    if (ALWAYS.has(k) || wanted.has(k)) return true;
    return choiceNames.some((c) => k.startsWith(c) && /^[A-Z]/.test(k.charAt(c.length)));
  };
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(resource)) if (keep(key)) out[key] = value;
  return markSubsetted(out, resource);
}

/**
 * The JSON text of `out`, a part of the parsed `resource`, with the SUBSETTED tag added once (resourceType first, as
 * everywhere else) and the exact number texts of `resource`'s own properties kept.
 */
export function markSubsetted(out: Record<string, unknown>, resource: object): string {
  const meta = { ...((out.meta as Record<string, unknown> | undefined) ?? {}) };
  const tags = Array.isArray(meta.tag) ? (meta.tag as { system?: string; code?: string }[]) : [];
  if (!tags.some((t) => t.system === SUBSETTED.system && t.code === SUBSETTED.code)) {
    meta.tag = [...tags, SUBSETTED];
  }
  out.meta = meta;
  // resourceType first, as everywhere else.
  const shaped = { resourceType: out.resourceType, ...out };
  copyRawNumbers(resource, shaped);
  return stringifyJson(shaped);
}
