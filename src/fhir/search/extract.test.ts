// Index extraction: the fast path must agree with HL7's fhirpath engine on every R4 example, and values are
// normalised as https://hl7.org/fhir/R4/search.html says.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Resource } from '../types.js';
import { extractAll, extractValues, fastEvaluator, fhirpathEvaluator, indexedParamsOf } from './extract.js';
import { parseFastPath } from './fast-path.js';
import { dateRange, decimalRange, normaliseString, referenceParts, toIndexValues } from './normalise.js';
import { getSearchParam, searchParamsOf, splitUnion } from './registry.js';

const EXAMPLES = path.resolve('node_modules/hl7.fhir.r4.examples');

function sortedKeys(values: readonly object[]): string[] {
  return values.map((v) => JSON.stringify(v)).sort();
}

describe('registry', () => {
  it('reads parameters from the published bundles, per type, with common ones', () => {
    const name = getSearchParam('Patient', 'name');
    expect(name).toMatchObject({ code: 'name', type: 'string', expression: 'Patient.name' });
    expect(getSearchParam('Practitioner', 'name')?.expression).toBe('Practitioner.name');
    expect(getSearchParam('Observation', 'subject')?.targets).toContain('Patient');
    expect(getSearchParam('Observation', 'patient')?.expression).toBe(
      'Observation.subject.where(resolve() is Patient)',
    );
    expect(getSearchParam('Observation', 'value-quantity')?.expression).toBe(
      '(Observation.value as Quantity) | (Observation.value as SampledData)',
    );
    expect(getSearchParam('InsurancePlan', 'name')?.expression).toBe(
      'InsurancePlan.name | InsurancePlan.alias',
    );
    for (const t of ['Patient', 'Project', 'AsyncJob', 'Login']) {
      expect(getSearchParam(t, '_id')?.expression).toBe(`${t}.id`);
      expect(getSearchParam(t, '_lastUpdated')?.type).toBe('date');
      expect(getSearchParam(t, '_tag')?.expression).toBe(`${t}.meta.tag`);
    }
    expect(getSearchParam('ProjectMembership', 'external-id')?.type).toBe('string');
    expect(getSearchParam('AsyncJob', 'status')?.type).toBe('token');
    expect(getSearchParam('User', 'email')?.expression).toBe('User.email');
    expect(getSearchParam('Patient', 'nope')).toBeUndefined();
    expect(searchParamsOf('Patient').length).toBeGreaterThan(20);
    expect(searchParamsOf('Nope')).toEqual([]);
  });

  it('splits unions outside parentheses and quotes only', () => {
    expect(splitUnion("A.b | (A.c as X) | A.d.where(e='x|y')")).toEqual([
      'A.b',
      '(A.c as X)',
      "A.d.where(e='x|y')",
    ]);
  });
});

describe('fast path', () => {
  it('parses the supported subset and refuses the rest', () => {
    expect(parseFastPath('Observation.subject.where(resolve() is Patient)')).toBeTruthy();
    expect(parseFastPath("Patient.telecom.where(system='phone')")).toBeTruthy();
    expect(parseFastPath('(Observation.value as CodeableConcept).text')).toBeTruthy();
    expect(parseFastPath('Condition.onset.as(Age)')).toBeTruthy();
    expect(parseFastPath('Bundle.entry[0].resource')).toBeTruthy();
    expect(parseFastPath('Patient.deceased.exists() and Patient.deceased != false')).toBeUndefined();
    expect(parseFastPath('ProjectMembership.profile.resolve().resourceType')).toBeUndefined();
  });

  it('agrees with HL7 fhirpath on every R4 example for every parameter it handles', () => {
    const files = fs
      .readdirSync(EXAMPLES)
      .filter((f) => f.endsWith('.json') && f !== 'package.json' && !f.startsWith('.'));
    expect(files.length).toBeGreaterThan(5000);
    let compared = 0;
    let withValues = 0;
    let fallback = 0;
    const mismatches: string[] = [];
    const t0 = performance.now();
    for (const f of files) {
      const resource = JSON.parse(fs.readFileSync(path.join(EXAMPLES, f), 'utf8')) as Resource;
      if (typeof resource.resourceType !== 'string') continue;
      for (const p of indexedParamsOf(resource.resourceType)) {
        const fast = fastEvaluator(resource.resourceType, p.param);
        if (!fast) {
          fallback++;
          continue;
        }
        compared++;
        const mine = toIndexValues(p.param.type, fast(resource));
        // The reference engine evaluates each union part (FHIRPath `|` would also merge values it deems equal).
        const theirs = toIndexValues(
          p.param.type,
          splitUnion(p.param.expression).flatMap((part) => fhirpathEvaluator(part)(resource)),
        );
        if (mine.length > 0) withValues++;
        const a = sortedKeys(mine);
        const b = sortedKeys(theirs);
        if (JSON.stringify(a) !== JSON.stringify(b))
          mismatches.push(`${f} ${p.param.code}: ${a.join()} != ${b.join()}`);
      }
    }
    console.log(
      `fast path vs fhirpath: ${files.length} examples, ${compared} (resource, parameter) pairs compared, ` +
        `${withValues} with values, ${fallback} pairs on fhirpath only; ${Math.round(performance.now() - t0)} ms`,
    );
    expect(mismatches).toEqual([]);
    expect(withValues).toBeGreaterThan(30_000);
  }, 600_000);

  it('uses fhirpath for the rest, with resolve() reading the reference', () => {
    const profileType = getSearchParam('ProjectMembership', 'profile-type')!;
    expect(fastEvaluator('ProjectMembership', profileType)).toBeUndefined();
    const pm = {
      resourceType: 'ProjectMembership',
      profile: { reference: 'Practitioner/1' },
      externalId: 'ext-1',
    };
    expect(extractValues(pm, profileType)).toEqual([
      { t: 'token', system: null, value: 'Practitioner', text: null },
    ]);
    const all = extractAll(pm);
    expect(all.find((x) => x.code === 'external-id')?.values).toEqual([
      { t: 'string', norm: 'ext-1', exact: 'ext-1' },
    ]);
    expect(all.find((x) => x.code === 'profile')?.values[0]).toMatchObject({ ref: 'Practitioner/1' });
  });

  it('evaluates `X.exists() and X != false` (Patient-deceased) like fhirpath', () => {
    const p = getSearchParam('Patient', 'deceased')!;
    const fast = fastEvaluator('Patient', p)!;
    for (const r of [
      { resourceType: 'Patient' },
      { resourceType: 'Patient', deceasedBoolean: false },
      { resourceType: 'Patient', deceasedBoolean: true },
      { resourceType: 'Patient', deceasedDateTime: '2020-01-01' },
    ]) {
      expect(toIndexValues('token', fast(r))).toEqual(
        toIndexValues('token', fhirpathEvaluator(p.expression)(r)),
      );
    }
    expect(extractValues({ resourceType: 'Patient', deceasedDateTime: '2020' }, p)).toEqual([
      { t: 'token', system: null, value: 'true', text: null },
    ]);
  });
});

describe('normalisation', () => {
  it('strings: lower case without accents, HumanName and Address parts plus the whole', () => {
    expect(normaliseString('Zoë ÅNGSTRÖM')).toBe('zoe angstrom');
    expect(normaliseString('x'.repeat(300))).toHaveLength(255);
    const name = getSearchParam('Patient', 'name')!;
    const v = extractValues(
      { resourceType: 'Patient', name: [{ family: 'Müller', given: ['Zoë', 'A'], text: 'Dr Z' }] },
      name,
    );
    expect(v.map((x) => (x.t === 'string' ? x.norm : ''))).toEqual([
      'zoe',
      'a',
      'muller',
      'zoe a muller',
      'dr z',
    ]);
  });

  it('tokens from Coding, CodeableConcept, Identifier, ContactPoint, code and boolean', () => {
    const code = getSearchParam('Observation', 'code')!;
    expect(
      extractValues(
        {
          resourceType: 'Observation',
          code: { coding: [{ system: 's', code: 'c', display: 'Dísplay' }], text: 'Text' },
        },
        code,
      ),
    ).toEqual([
      { t: 'token', system: 's', value: 'c', text: 'display' },
      { t: 'token', system: null, value: null, text: 'text' },
    ]);
    const active = getSearchParam('Patient', 'active')!;
    expect(extractValues({ resourceType: 'Patient', active: false }, active)).toEqual([
      { t: 'token', system: null, value: 'false', text: null },
    ]);
    const phone = getSearchParam('Patient', 'phone')!;
    expect(
      extractValues(
        {
          resourceType: 'Patient',
          telecom: [
            { system: 'phone', value: '1' },
            { system: 'email', value: 'e' },
          ],
        },
        phone,
      ),
    ).toEqual([{ t: 'token', system: 'phone', value: '1', text: null }]);
  });

  it('references: relative, absolute reduced to Type/id, urn and contained', () => {
    const subject = getSearchParam('Observation', 'subject')!;
    const ref = (reference: string) =>
      extractValues({ resourceType: 'Observation', subject: { reference } }, subject);
    expect(ref('Patient/1')).toEqual([
      { t: 'reference', targetType: 'Patient', targetId: '1', ref: 'Patient/1' },
    ]);
    expect(ref('https://x.org/fhir/Patient/1/_history/3')).toEqual([
      { t: 'reference', targetType: 'Patient', targetId: '1', ref: 'Patient/1' },
    ]);
    expect(ref('urn:uuid:abc')).toEqual([
      { t: 'reference', targetType: null, targetId: null, ref: 'urn:uuid:abc' },
    ]);
    expect(ref('#contained')).toEqual([]);
    expect(referenceParts('Nope/1')).toBeUndefined();
  });

  it('dates become [low, high) ranges at their precision', () => {
    expect(dateRange('2020')).toEqual({ low: '2020-01-01T00:00:00.000Z', high: '2021-01-01T00:00:00.000Z' });
    expect(dateRange('2020-02')).toEqual({
      low: '2020-02-01T00:00:00.000Z',
      high: '2020-03-01T00:00:00.000Z',
    });
    expect(dateRange('2020-12-31')).toEqual({
      low: '2020-12-31T00:00:00.000Z',
      high: '2021-01-01T00:00:00.000Z',
    });
    expect(dateRange('2020-01-01T10:00:00+02:00')).toEqual({
      low: '2020-01-01T08:00:00.000Z',
      high: '2020-01-01T08:00:01.000Z',
    });
    expect(dateRange('2020-01-01T10:00:00.5Z')?.high).toBe('2020-01-01T10:00:00.600Z');
    expect(dateRange('0050-01-01')?.low).toBe('0050-01-01T00:00:00.000Z');
    expect(dateRange('2021-02-29')).toBeUndefined();
    expect(dateRange('9999-12-31')?.high).toBe('infinity');
    expect(dateRange('2020-01-01T25:00:00Z')).toBeUndefined();
    const period = getSearchParam('Encounter', 'date')!;
    expect(extractValues({ resourceType: 'Encounter', period: { start: '2020-01-01' } }, period)).toEqual([
      { t: 'date', low: Date.parse('2020-01-01T00:00:00Z'), high: Infinity },
    ]);
  });

  it('numbers carry their implicit precision', () => {
    expect(decimalRange('100')).toMatchObject({ value: '100', low: '99.5', high: '100.5' });
    expect(decimalRange('100.00')).toMatchObject({ low: '99.995', high: '100.005' });
    expect(decimalRange('-0.5')).toMatchObject({
      low: '-0.55',
      high: '-0.45',
      apLow: '-0.55',
      apHigh: '-0.45',
    });
    expect(decimalRange('1e2')).toMatchObject({ value: '100', low: '50', high: '150' });
    expect(decimalRange('abc')).toBeUndefined();
    const q = getSearchParam('Observation', 'value-quantity')!;
    expect(
      extractValues(
        {
          resourceType: 'Observation',
          valueQuantity: { value: 5.4, unit: 'mg', system: 'http://unitsofmeasure.org', code: 'mg' },
        },
        q,
      ),
    ).toEqual([{ t: 'quantity', value: '5.4', system: 'http://unitsofmeasure.org', code: 'mg', unit: 'mg' }]);
  });
});
