// ConceptMap translation (https://hl7.org/fhir/R4/conceptmap.html, $translate
// https://hl7.org/fhir/R4/conceptmap-operation-translate.html): the targets a source code maps to (or with `reverse`,
// the sources that map to a target code), group by group, with each element's equivalence; a group's `unmapped`
// (`provided`: the code itself, `fixed`: its code) answers for codes no element names.
import type { Coding } from '../model.js';
import type { Resource } from '../../types.js';

export interface TranslateRequest {
  system?: string;
  code: string;
  /** Only groups mapping to this code system. */
  targetSystem?: string;
  reverse: boolean;
}

export interface Match {
  equivalence: string;
  concept: Coding;
  /** The ConceptMap's canonical. */
  source?: string;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const list = (v: unknown): Json[] => (Array.isArray(v) ? v.filter(isObject) : []);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

const coding = (system: unknown, version: unknown, code: unknown, display: unknown): Coding => {
  const out: Coding = {};
  if (typeof system === 'string') out.system = system;
  if (typeof version === 'string') out.version = version;
  if (typeof code === 'string') out.code = code;
  if (typeof display === 'string') out.display = display;
  return out;
};

/** Matches where a group's source system is `system` (forward). */
function forward(g: Json, r: TranslateRequest): Omit<Match, 'source'>[] {
  const out: Omit<Match, 'source'>[] = [];
  const elements = list(g.element).filter((e) => e.code === r.code);
  for (const e of elements)
    for (const t of list(e.target))
      out.push({
        equivalence: str(t.equivalence) ?? 'equivalent',
        concept: coding(g.target, g.targetVersion, t.code, t.display),
      });
  const unmapped = isObject(g.unmapped) ? g.unmapped : undefined;
  if (elements.length === 0 && unmapped?.mode === 'provided')
    out.push({ equivalence: 'equal', concept: coding(g.target, g.targetVersion, r.code, undefined) });
  if (elements.length === 0 && unmapped?.mode === 'fixed')
    out.push({
      equivalence: 'inexact',
      concept: coding(g.target, g.targetVersion, unmapped.code, unmapped.display),
    });
  return out;
}

/** Matches where a group's target system is `system` (reverse): the sources that map to the code. */
function backward(g: Json, r: TranslateRequest): Omit<Match, 'source'>[] {
  const out: Omit<Match, 'source'>[] = [];
  for (const e of list(g.element))
    for (const t of list(e.target))
      if (t.code === r.code)
        out.push({
          equivalence: str(t.equivalence) ?? 'equivalent',
          concept: coding(g.source, g.sourceVersion, e.code, e.display),
        });
  return out;
}

export function translate(cm: Resource, r: TranslateRequest): Match[] {
  const source = str(cm.url);
  const out: Match[] = [];
  for (const g of list(cm.group)) {
    const [from, to] = r.reverse ? [g.target, g.source] : [g.source, g.target];
    if (r.system !== undefined && from !== r.system) continue;
    if (r.targetSystem !== undefined && to !== r.targetSystem) continue;
    for (const m of r.reverse ? backward(g, r) : forward(g, r))
      out.push({ ...m, ...(source ? { source } : {}) });
  }
  return out;
}

/** Whether a match says the codes mean (nearly) the same. */
export const isMapped = (m: Match): boolean => m.equivalence !== 'unmatched' && m.equivalence !== 'disjoint';
