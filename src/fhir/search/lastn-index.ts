// The `$lastn` index rows of an Observation (migration 020, https://hl7.org/fhir/R4/observation-operation-lastn.html):
// for each subject reference, code and category key, the Observation's latest effective instant. Codes are grouped by
// `coding.system` and `coding.code`; a code with no coding but a text is grouped by its exact text (system `#text`).
import { indexKey } from './normalise.js';
import type { ExtractedValues } from './extract-composite.js';

/** One sp_lastn row: subject, category key, code system and value, effective (epoch ms, -Infinity when none). */
export interface LastnRow {
  subject: string;
  category: string;
  system: string;
  value: string;
  effective: number;
}

/** The system of text-only codes in the index (not a URI, so no coding's system equals it). */
export const TEXT_SYSTEM = '#text';
/** Most rows one Observation contributes (a hostile one with thousands of codings gets the first ones). */
const MAX_ROWS = 200;

type Obj = Record<string, unknown>;
const str = (v: unknown): v is string => typeof v === 'string' && v.length > 0;
const arr = (v: unknown): Obj[] =>
  Array.isArray(v) ? (v as Obj[]).filter((x) => x && typeof x === 'object') : [];

/** `(system, code)` pairs of a CodeableConcept's codings, or its text alone. */
export function codeKeys(cc: unknown): [string, string][] {
  if (!cc || typeof cc !== 'object') return [];
  const o = cc as Obj;
  const keys: [string, string][] = arr(o.coding)
    .filter((c) => str(c.code))
    .map((c) => [indexKey(str(c.system) ? c.system : ''), indexKey(c.code as string)]);
  if (keys.length === 0 && str(o.text)) keys.push([TEXT_SYSTEM, indexKey(o.text)]);
  return keys;
}

/** The category keys of an Observation: '' (always), and `<system>|<code>` and `*|<code>` of each category coding. */
function categoryKeys(resource: Obj): string[] {
  const keys = new Set<string>(['']);
  for (const cc of arr(resource.category))
    for (const c of arr(cc.coding)) {
      if (!str(c.code)) continue;
      keys.add(indexKey(`${str(c.system) ? c.system : ''}|${c.code}`));
      keys.add(indexKey(`*|${c.code}`));
    }
  return [...keys];
}

/** The rows of an Observation, from its JSON and its already extracted `subject` and `date` values. */
export function lastnRows(resource: Obj, extracted: readonly ExtractedValues[]): LastnRow[] {
  if (resource.resourceType !== 'Observation') return [];
  const subjects = new Set<string>();
  let effective = -Infinity;
  for (const e of extracted) {
    if (e.grp !== undefined) continue;
    for (const v of e.values) {
      if (e.code === 'subject' && v.t === 'reference' && v.targetId !== null) subjects.add(v.ref);
      if (e.code === 'date' && v.t === 'date' && v.high > effective) effective = v.high;
    }
  }
  if (subjects.size === 0) return [];
  const codes = codeKeys(resource.code);
  const categories = categoryKeys(resource);
  const rows: LastnRow[] = [];
  for (const subject of subjects)
    for (const category of categories)
      for (const [system, value] of codes) {
        if (rows.length >= MAX_ROWS) return rows;
        rows.push({ subject, category, system, value, effective });
      }
  return rows;
}
