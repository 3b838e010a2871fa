// Expansion of a ValueSet's compose (https://hl7.org/fhir/R4/valueset.html#compositions): each include is the
// intersection of its system part (listed concepts, the filters all applied, or the whole code system) and the value
// sets it imports; the value set is the union of its includes minus the union of its excludes. A ValueSet without
// compose answers the `expansion` it carries. More than `maxCodes` codes at any step is `too-costly` (422): a partial
// expansion is never presented as whole.
import { FhirError } from '../../outcome.js';
import type { Resource } from '../../types.js';
import type { CodeSystemIndex } from './code-system-index.js';
import { applyFilter, type Filter } from './filters.js';

export interface Code {
  system: string;
  version?: string;
  code: string;
  display?: string;
  inactive?: boolean;
}

/** Codes by `system` NUL `code`, in expansion order. */
export type CodeSet = Map<string, Code>;

export const codeKey = (system: string, code: string): string => `${system}\u0000${code}`;

/** Where expansion finds what a compose names (index.ts: resolution, caches, cycle checks). */
export interface ExpandSources {
  codeSystem(system: string, version?: string): Promise<CodeSystemIndex | undefined>;
  /** The expansion of an imported value set (a canonical); throws when it is unknown or cannot be expanded. */
  valueSet(canonical: string): Promise<CodeSet>;
  maxCodes: number;
  /** compose.inactive = false: inactive codes are left out. */
  activeOnly?: boolean;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const list = (v: unknown): Json[] => (Array.isArray(v) ? v.filter(isObject) : []);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

export const tooCostly = (max: number): FhirError =>
  new FhirError(
    'too-costly',
    `The value set has more than ${max} codes: too many to expand (no partial expansion is given)`,
    'terminology.too-costly',
  );

/** The error for code systems the server holds no concepts of (LOINC, SNOMED CT, … when not stored). */
export const UNKNOWN_SYSTEM = 'terminology.unknown-system';
const unknownSystem = (system: string, why: string): FhirError =>
  new FhirError(
    'not-supported',
    `Cannot expand: ${why} of the code system ${system.slice(0, 200)}, which this server does not hold (store the CodeSystem with its concepts, or list the codes)`,
    UNKNOWN_SYSTEM,
    { status: 422 },
  );

function checkSize(set: { size: number }, max: number): void {
  if (set.size > max) throw tooCostly(max);
}

function fromIndex(cs: CodeSystemIndex, positions: Iterable<number>, src: ExpandSources): CodeSet {
  const out: CodeSet = new Map();
  for (const i of positions) {
    const c = cs.concepts[i];
    if (!c || (c.inactive && src.activeOnly)) continue;
    out.set(codeKey(cs.url, c.code), {
      system: cs.url,
      ...(cs.version !== undefined ? { version: cs.version } : {}),
      code: c.code,
      ...(c.display !== undefined ? { display: c.display } : {}),
      ...(c.inactive ? { inactive: true } : {}),
    });
    checkSize(out, src.maxCodes);
  }
  return out;
}

function listed(
  system: string,
  concepts: Json[],
  cs: CodeSystemIndex | undefined,
  src: ExpandSources,
): CodeSet {
  const out: CodeSet = new Map();
  const checked = cs && cs.content !== 'fragment' && cs.content !== 'not-present';
  for (const c of concepts) {
    const code = str(c.code);
    if (code === undefined) continue;
    const at = cs?.find(code);
    if (checked && at === undefined) continue; // not a code of that code system
    const display = str(c.display) ?? (at !== undefined ? cs?.concepts[at]?.display : undefined);
    const concept = at !== undefined ? cs?.concepts[at] : undefined;
    if (concept?.inactive && src.activeOnly) continue;
    const found = concept?.code;
    out.set(codeKey(system, found ?? code), {
      system,
      ...(cs?.version !== undefined ? { version: cs.version } : {}),
      code: found ?? code,
      ...(display !== undefined ? { display } : {}),
      ...(concept?.inactive ? { inactive: true } : {}),
    });
    checkSize(out, src.maxCodes);
  }
  return out;
}

async function systemPart(inc: Json, system: string, src: ExpandSources): Promise<CodeSet> {
  const cs = await src.codeSystem(system, str(inc.version));
  const concepts = list(inc.concept);
  const filters = list(inc.filter);
  if (concepts.length > 0) return listed(system, concepts, cs, src);
  if (!cs || cs.content === 'not-present')
    throw unknownSystem(system, filters.length > 0 ? 'a filter' : 'the whole content');
  if (filters.length === 0) {
    if (cs.concepts.length > src.maxCodes) throw tooCostly(src.maxCodes);
    return fromIndex(cs, cs.concepts.keys(), src);
  }
  let positions: Set<number> | undefined;
  for (const f of filters) {
    const filter: Filter = {
      property: str(f.property) ?? '',
      op: str(f.op) ?? '',
      value: str(f.value) ?? '',
    };
    const hit = applyFilter(cs, filter);
    positions = positions ? new Set(hit.filter((i) => (positions as Set<number>).has(i))) : new Set(hit);
  }
  return fromIndex(cs, positions ?? [], src);
}

const intersect = (a: CodeSet, b: CodeSet): CodeSet => new Map([...a].filter(([k]) => b.has(k)));

/** One include or exclude: its system part intersected with every imported value set. */
async function part(inc: Json, src: ExpandSources): Promise<CodeSet> {
  const system = str(inc.system);
  const imports = Array.isArray(inc.valueSet) ? inc.valueSet.filter((v) => typeof v === 'string') : [];
  let out: CodeSet | undefined = system !== undefined ? await systemPart(inc, system, src) : undefined;
  for (const canonical of imports as string[]) {
    const vs = await src.valueSet(canonical);
    out = out ? intersect(out, vs) : vs;
  }
  return out ?? new Map();
}

/** The codes of an `expansion.contains` tree (walked without recursion), for a ValueSet without compose. */
function carried(expansion: Json, max: number): CodeSet {
  const out: CodeSet = new Map();
  const stack: Json[] = [...list(expansion.contains)].reverse();
  while (stack.length > 0) {
    const c = stack.pop() as Json;
    const system = str(c.system);
    const code = str(c.code);
    const version = str(c.version);
    const display = str(c.display);
    if (system !== undefined && code !== undefined && c.abstract !== true)
      out.set(codeKey(system, code), {
        system,
        ...(version !== undefined ? { version } : {}),
        code,
        ...(display !== undefined ? { display } : {}),
      });
    checkSize(out, max);
    stack.push(...list(c.contains).reverse());
  }
  return out;
}

/** Every code of `vs`. */
export async function expandCompose(vs: Resource, sources: ExpandSources): Promise<CodeSet> {
  const compose = isObject(vs.compose) ? vs.compose : undefined;
  if (!compose) return isObject(vs.expansion) ? carried(vs.expansion, sources.maxCodes) : new Map();
  const src = { ...sources, activeOnly: compose.inactive === false };
  const out: CodeSet = new Map();
  for (const inc of list(compose.include)) {
    for (const [k, c] of await part(inc, src)) if (!out.has(k)) out.set(k, c);
    checkSize(out, src.maxCodes);
  }
  for (const exc of list(compose.exclude)) for (const k of (await part(exc, src)).keys()) out.delete(k);
  return out;
}
