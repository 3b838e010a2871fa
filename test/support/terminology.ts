// A Terminology for tests of the search modifiers that need one (`:in`, `:not-in`, token `:below`/`:above`):
// value sets per project (or shared) and code system hierarchies held in memory, answering as the interface of
// src/fhir/conformance/model.ts says (undefined when unknown, a 422 too-costly FhirError when too large).
import type { At, Expansion, ExpansionContains, Terminology } from '../../src/fhir/conformance/model.js';
import { FhirError } from '../../src/fhir/outcome.js';

export interface FakeTerminologyData {
  /** By project id (`*`: the shared set), then by value set url: its codes. */
  valueSets: Record<string, Record<string, ExpansionContains[]>>;
  /** Value set urls too large to expand (422). */
  tooLarge?: string[];
  /** By code system url: each code's parents (is-a). */
  hierarchies?: Record<string, Record<string, string[]>>;
}

export interface FakeTerminology extends Terminology {
  /** The expand calls made so far: `projectId url`. */
  calls: string[];
}

export function fakeTerminology(data: FakeTerminologyData): FakeTerminology {
  const calls: string[] = [];
  const closure = (system: string, code: string, up: boolean): string[] | undefined => {
    const parents = data.hierarchies?.[system];
    if (!parents || !(code in parents)) return undefined;
    const next = (c: string): string[] =>
      up ? (parents[c] ?? []) : Object.keys(parents).filter((k) => (parents[k] ?? []).includes(c));
    const out = new Set([code]);
    const todo = [code];
    while (todo.length)
      for (const n of next(todo.pop() as string)) if (!out.has(n)) todo.push((out.add(n), n));
    return [...out];
  };
  return {
    calls,
    async expand(at: At, valueSet, options = {}): Promise<Expansion | undefined> {
      if (typeof valueSet !== 'string') return undefined;
      const url = valueSet.split('|')[0] as string;
      calls.push(`${at.projectId ?? '-'} ${url}`);
      if (data.tooLarge?.includes(url))
        throw new FhirError('too-costly', `Value set '${url}' is too large to expand`, 'test.too-costly');
      const own = at.projectId !== null ? data.valueSets[at.projectId]?.[url] : undefined;
      const codes = own ?? data.valueSets['*']?.[url];
      if (!codes) return undefined;
      const offset = options.offset ?? 0;
      const count = options.count ?? codes.length;
      return { total: codes.length, contains: codes.slice(offset, offset + count) };
    },
    validateCode: async () => undefined,
    below: async (_at, system, code) => closure(system, code, false),
    above: async (_at, system, code) => closure(system, code, true),
  };
}
