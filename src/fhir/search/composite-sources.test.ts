// Composites read from other rows (composite-sources.ts) match exactly the resources their own `<code>$<k>` rows
// matched: for each resource, the component value tuples one element holds are the same either way.
// https://hl7.org/fhir/R4/search.html#composite
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Resource } from '../types.js';
import { compositeSources, derivedComposites } from './composite-sources.js';
import { compositeValuesOf } from './extract-composite.js';
import { extractAll } from './extract.js';
import type { IndexValue } from './normalise.js';
import { getSearchParam, searchParamsOf } from './registry.js';

const LOINC = 'http://loinc.org';
const SNOMED = 'http://snomed.info/sct';
const qty = (value: number, code = 'mm[Hg]'): object => ({
  value,
  unit: code,
  system: 'http://unitsofmeasure.org',
  code,
});
const concept = (code: string): object => ({ coding: [{ system: SNOMED, code, display: `d${code}` }] });
const code = (...codes: string[]): object => ({ coding: codes.map((c) => ({ system: LOINC, code: c })) });

/** Observations of every shape the composites differ on. */
const SAMPLES: Resource[] = [
  { resourceType: 'Observation', status: 'final', code: code('8867-4'), valueQuantity: qty(72, '/min') },
  { resourceType: 'Observation', status: 'final', code: code('1', '2'), valueQuantity: qty(5) },
  {
    resourceType: 'Observation',
    status: 'final',
    code: code('3'),
    valueCodeableConcept: concept('260385009'),
  },
  { resourceType: 'Observation', status: 'final', code: code('4'), valueString: 'x' },
  {
    resourceType: 'Observation',
    status: 'final',
    code: code('5'),
    valueSampledData: { origin: { value: 0 }, period: 1, dimensions: 1, data: '1 2' },
  },
  { resourceType: 'Observation', status: 'final', code: code('6') },
  { resourceType: 'Observation', status: 'final', valueQuantity: qty(7) },
  {
    resourceType: 'Observation',
    status: 'final',
    code: code('85354-9'),
    valueQuantity: qty(1),
    component: [
      { code: code('8480-6'), valueQuantity: qty(120) },
      { code: code('8462-4'), valueQuantity: qty(80) },
      { code: code('9'), valueCodeableConcept: concept('1') },
      { code: code('10'), valueSampledData: { origin: { value: 3 }, period: 1, dimensions: 1 } },
      { valueQuantity: qty(11) },
    ],
  },
  {
    resourceType: 'Observation',
    status: 'final',
    code: code('12'),
    valueCodeableConcept: concept('2'),
    component: [{ code: code('8480-6'), valueCodeableConcept: concept('2') }],
  },
] as Resource[];

const EXAMPLES = path.resolve('node_modules/hl7.fhir.r4.examples');

function examples(): Resource[] {
  return fs
    .readdirSync(EXAMPLES)
    .filter((f) => f.startsWith('Observation-') && f.endsWith('.json'))
    .map((f) => JSON.parse(fs.readFileSync(path.join(EXAMPLES, f), 'utf8')) as Resource);
}

/** A value as a search compares it: a token's display is no part of a composite's match. */
function key(v: IndexValue): string {
  const { text: _text, ...rest } = v as IndexValue & { text?: unknown };
  return JSON.stringify(rest);
}

/** Every (component 0, component 1, ...) value tuple of elements of one composite's rows, as text. */
function ownTuples(resource: Resource, compositeCode: string): Set<string> {
  const param = getSearchParam(resource.resourceType, compositeCode);
  if (!param) throw new Error(compositeCode);
  const byGrp = new Map<number, string[][]>();
  for (const { code: c, values, grp = 0 } of compositeValuesOf(resource, param)) {
    const k = Number(c.slice(c.lastIndexOf('$') + 1));
    const parts = byGrp.get(grp) ?? [];
    parts[k] = values.map(key);
    byGrp.set(grp, parts);
  }
  const out = new Set<string>();
  for (const parts of byGrp.values()) for (const t of product(parts)) out.add(t);
  return out;
}

function product(parts: string[][]): string[] {
  return parts.reduce<string[]>(
    (acc, values) => acc.flatMap((a) => values.map((v) => (a ? `${a}\n${v}` : v))),
    [''],
  );
}

/** The same tuples as composite-sources.ts reads them. */
function derivedTuples(resource: Resource, compositeCode: string): Set<string> {
  const out = new Set<string>();
  const ordinary = extractAll(resource).filter((e) => e.grp === undefined);
  for (const s of compositeSources(resource.resourceType, compositeCode) ?? []) {
    const tuples =
      'rows' in s
        ? [...ownTuples(resource, s.rows)]
        : product(
            s.ordinary.map((c) => ordinary.filter((e) => e.code === c).flatMap((e) => e.values.map(key))),
          );
    for (const t of tuples) out.add(t);
  }
  return out;
}

describe('composites read from other rows', () => {
  it('are only those named, with components of the types and order of the composite', () => {
    expect([...derivedComposites('Observation')].sort()).toEqual([
      'code-value-concept',
      'code-value-quantity',
      'combo-code-value-concept',
      'combo-code-value-quantity',
    ]);
    expect(derivedComposites('Patient').size).toBe(0);
    for (const c of derivedComposites('Observation')) {
      const param = getSearchParam('Observation', c);
      const types = (param?.components ?? []).map((x) => x.type);
      for (const s of compositeSources('Observation', c) ?? []) {
        const parts =
          'rows' in s
            ? (getSearchParam('Observation', s.rows)?.components ?? []).map((x) => x.type)
            : s.ordinary.map((o) => getSearchParam('Observation', o)?.type);
        expect(parts, `${c}`).toEqual(types);
      }
    }
  });

  it('find the same component tuples as the composite rows, on samples and every R4 Observation example', () => {
    const resources = [...SAMPLES, ...examples()];
    expect(resources.length).toBeGreaterThan(50);
    let nonEmpty = 0;
    for (const resource of resources) {
      for (const c of derivedComposites('Observation')) {
        const own = [...ownTuples(resource, c)].sort();
        expect(
          [...derivedTuples(resource, c)].sort(),
          `${c} of ${JSON.stringify(resource).slice(0, 200)}`,
        ).toEqual(own);
        if (own.length > 0) nonEmpty++;
      }
    }
    // Not vacuous: most resources give some tuple.
    expect(nonEmpty).toBeGreaterThan(60);
  });

  it('are not written as rows; the other composites still are', () => {
    const codes = new Set(extractAll(SAMPLES[7] as Resource).map((e) => e.code));
    for (const c of derivedComposites('Observation')) {
      expect(codes.has(`${c}$0`)).toBe(false);
      expect(codes.has(`${c}$1`)).toBe(false);
    }
    expect(codes.has('component-code-value-quantity$0')).toBe(true);
    expect(codes.has('component-code-value-quantity$1')).toBe(true);
    const other = searchParamsOf('Observation').filter((p) => p.code === 'code-value-string');
    expect(other).toHaveLength(1);
    expect(extractAll(SAMPLES[3] as Resource).some((e) => e.code === 'code-value-string$0')).toBe(true);
  });
});
