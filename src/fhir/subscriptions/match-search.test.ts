// Unit cases of the in-memory search matcher: each parameter type, modifier and prefix, and what it refuses.
// https://hl7.org/fhir/R4/search.html
import { describe, expect, it } from 'vitest';
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import { compileCriteria } from './match-search.js';

const LOINC = 'http://loinc.org';
const UCUM = 'http://unitsofmeasure.org';

const patient: Resource = {
  resourceType: 'Patient',
  id: 'p1',
  meta: {
    lastUpdated: '2024-03-01T10:00:00.000Z',
    tag: [{ system: 'http://example.org/tags', code: 'vip' }],
    profile: ['http://example.org/StructureDefinition/p'],
  },
  active: true,
  gender: 'female',
  birthDate: '1980-05',
  name: [{ family: 'Zoë-Smith', given: ['Anna', 'Maria'] }],
  identifier: [
    { system: 'http://example.org/mrn', value: 'MRN1' },
    { system: 'http://example.org/other', value: 'A,B' },
  ],
  telecom: [{ system: 'phone', value: '555-0100' }],
  address: [{ city: 'Springfield' }],
  managingOrganization: { reference: 'Organization/o1' },
  generalPractitioner: [{ reference: 'https://other.example/fhir/Practitioner/dr9' }],
};

const observation: Resource = {
  resourceType: 'Observation',
  id: 'o1',
  status: 'final',
  code: { coding: [{ system: LOINC, code: '8867-4', display: 'Heart rate' }], text: 'Heart rate' },
  subject: { reference: 'Patient/p1' },
  effectiveDateTime: '2024-02-10T08:30:00Z',
  valueQuantity: { value: 72, unit: 'beats/minute', system: UCUM, code: '/min' },
  component: [
    {
      code: { coding: [{ system: LOINC, code: '8480-6' }] },
      valueQuantity: { value: 120, system: UCUM, code: 'mm[Hg]' },
    },
    {
      code: { coding: [{ system: LOINC, code: '8462-4' }] },
      valueQuantity: { value: 80, system: UCUM, code: 'mm[Hg]' },
    },
  ],
};

const encounter: Resource = {
  resourceType: 'Encounter',
  id: 'e1',
  status: 'in-progress',
  class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
  period: { start: '2024-01-05T09:00:00Z' },
  length: { value: 1.5, unit: 'd', system: UCUM, code: 'd' },
};

const risk: Resource = {
  resourceType: 'RiskAssessment',
  id: 'r1',
  status: 'final',
  subject: { reference: 'Patient/p1' },
  prediction: [{ probabilityDecimal: 0.25 }],
};

const valueSet: Resource = {
  resourceType: 'ValueSet',
  id: 'v1',
  status: 'active',
  url: 'http://example.org/fhir/ValueSet/a',
};

const byType: Record<string, Resource> = Object.fromEntries(
  [patient, observation, encounter, risk, valueSet].map((r) => [r.resourceType, r]),
);

/** [criteria, expected]: the criteria's type picks the resource. */
const CASES: [string, boolean][] = [
  // token
  [`Observation?code=${LOINC}|8867-4`, true],
  ['Observation?code=8867-4', true],
  ['Observation?code=|8867-4', false],
  [`Observation?code=${LOINC}|`, true],
  ['Observation?code=http://other.org|8867-4', false],
  [`Observation?code:not=${LOINC}|8867-4`, false],
  ['Observation?code:not=1234-5', true],
  ['Observation?code:text=heart', true],
  ['Observation?code:text=rate', false],
  ['Observation?status=final,amended', true],
  ['Observation?status=amended', false],
  ['Patient?identifier=http://example.org/mrn|MRN1', true],
  ['Patient?identifier=MRN1', true],
  ['Patient?identifier=mrn1', false],
  ['Patient?identifier=http://example.org/other|A\\,B', true],
  ['Patient?active=true', true],
  ['Patient?gender=male', false],
  ['Patient?telecom=phone|555-0100', true],
  ['Patient?_tag=http://example.org/tags|vip', true],
  ['Patient?_tag=vip&gender=male', false],
  // string
  ['Patient?name=zoe', true],
  ['Patient?family=smith', false],
  ['Patient?family:contains=smith', true],
  ['Patient?family:exact=Zoë-Smith', true],
  ['Patient?family:exact=zoë-smith', false],
  ['Patient?given=mar', true],
  ['Patient?name=anna maria', true],
  ['Patient?address-city=SPRING', true],
  // reference
  ['Observation?subject=Patient/p1', true],
  ['Observation?subject=p1', true],
  ['Observation?subject=Patient/p2', false],
  ['Observation?patient=p1', true],
  ['Observation?subject=http://cinder.test/fhir/R4/Patient/p1', true],
  ['Observation?subject:Patient=p1', true],
  ['Observation?subject:Group=p1', false],
  ['Patient?organization=Organization/o1', true],
  ['Patient?general-practitioner=Practitioner/dr9', true],
  ['Observation?subject:missing=false', true],
  ['Observation?performer:missing=true', true],
  ['Observation?performer:missing=false', false],
  // date
  ['Patient?birthdate=1980', true],
  ['Patient?birthdate=1980-05-15', false],
  ['Patient?birthdate=ap1980-05-15', true],
  ['Patient?birthdate=ge1980-05-15', true],
  ['Patient?birthdate=lt1980-05-15', true],
  ['Patient?birthdate=gt1980-06', false],
  ['Patient?birthdate=sa1980-04', true],
  ['Patient?birthdate=eb1980-06', true],
  ['Patient?birthdate=eb1980-05', false],
  ['Patient?birthdate=ne1980-05', false],
  ['Patient?birthdate=le1980-05', true],
  ['Observation?date=2024-02-10', true],
  ['Observation?date=2024-02-10T09:30:00+01:00', true],
  ['Observation?date=le2024-02-10T08:29', false],
  ['Observation?date=ge2024-02-01&date=lt2024-03-01', true],
  ['Observation?date=ge2024-02-01&date=lt2024-02-05', false],
  ['Encounter?date=gt2030', true],
  ['Encounter?date=lt2024-01-05', false],
  // number
  ['RiskAssessment?probability=0.25', true],
  ['RiskAssessment?probability=0.2', false],
  ['RiskAssessment?probability=gt0.2', true],
  ['RiskAssessment?probability=ap0.27', true],
  ['RiskAssessment?probability=lt0.25', false],
  ['RiskAssessment?probability=le0.25', true],
  ['RiskAssessment?probability=ne0.25', false],
  ['Encounter?length=1.5', true],
  ['Encounter?length=gt2', false],
  // quantity
  ['Observation?value-quantity=72', true],
  [`Observation?value-quantity=72|${UCUM}|/min`, true],
  ['Observation?value-quantity=72||beats/minute', true],
  [`Observation?value-quantity=72|${UCUM}|beats/minute`, false],
  ['Observation?value-quantity=72|http://other.org|', false],
  ['Observation?value-quantity=gt71.5', true],
  ['Observation?value-quantity=lt72', false],
  ['Observation?value-quantity=ap70', true],
  ['Observation?value-quantity=ap60', false],
  ['Observation?value-quantity=7.2e1', true],
  ['Observation?value-quantity=72.6', false],
  // composite: components of one element only
  [`Observation?component-code-value-quantity=${LOINC}|8480-6$gt100`, true],
  [`Observation?component-code-value-quantity=${LOINC}|8480-6$lt100`, false],
  [`Observation?component-code-value-quantity=${LOINC}|8462-4$gt100`, false],
  [`Observation?component-code-value-quantity=${LOINC}|8462-4$gt100,${LOINC}|8462-4$lt100`, true],
  [`Observation?code-value-quantity=${LOINC}|8867-4$72`, true],
  // uri
  ['ValueSet?url=http://example.org/fhir/ValueSet/a', true],
  ['ValueSet?url=http://example.org/fhir', false],
  ['ValueSet?url:below=http://example.org/fhir', true],
  ['ValueSet?url:above=http://example.org/fhir/ValueSet/a/v2', true],
  ['ValueSet?url:above=http://example.org/fhir', false],
  ['Patient?_profile=http://example.org/StructureDefinition/p', true],
  // _id, _lastUpdated
  ['Patient?_id=p1', true],
  ['Patient?_id=p2,p1', true],
  ['Patient?_id:not=p1', false],
  ['Patient?_id:not=p2', true],
  ['Patient?_lastUpdated=2024-03-01', true],
  ['Patient?_lastUpdated=gt2024-03-01T09:00:00Z', true],
  ['Patient?_lastUpdated=lt2024', false],
  ['Patient?_lastUpdated=le2024-03-01T10:00:00Z', true],
  // no criteria, ignored parameters
  ['Patient', true],
  ['Patient?', true],
  ['Patient?_format=json', true],
  ['Patient?name=', true],
];

describe('compileCriteria: matches', () => {
  it.each(CASES)('%s → %s', (criteria, expected) => {
    const compiled = compileCriteria(criteria);
    expect(compiled.matches(byType[compiled.resourceType] as Resource)).toBe(expected);
  });

  it('never matches another resource type', () => {
    const compiled = compileCriteria('Patient');
    expect(compiled.matches(observation)).toBe(false);
    expect(compiled.matches(patient)).toBe(true);
  });

  it('takes a query alone when the type is given (topic filters), or the same type', () => {
    expect(compileCriteria('code=8867-4', { resourceType: 'Observation' }).matches(observation)).toBe(true);
    expect(compileCriteria('?code=1', { resourceType: 'Observation' }).matches(observation)).toBe(false);
    const typed = compileCriteria('Observation?code=8867-4', { resourceType: 'Observation' });
    expect(typed.matches(observation)).toBe(true);
    expect(typed.query).toBe('code=8867-4');
    expect(compileCriteria('', { resourceType: 'Observation' }).matches(observation)).toBe(true);
  });

  it('answers a resource without the searched element as no match, and :missing as missing', () => {
    const bare: Resource = { resourceType: 'Observation', id: 'o2', status: 'final' };
    expect(compileCriteria('Observation?code=8867-4').matches(bare)).toBe(false);
    expect(compileCriteria('Observation?code:not=8867-4').matches(bare)).toBe(true);
    expect(compileCriteria('Observation?code:missing=true').matches(bare)).toBe(true);
    expect(compileCriteria('Observation?_lastUpdated=gt2000').matches(bare)).toBe(false);
  });

  it('reads each version afresh (nothing of one resource is kept for the next)', () => {
    const compiled = compileCriteria('Observation?status=final&code=8867-4');
    expect(compiled.matches(observation)).toBe(true);
    expect(compiled.matches({ ...observation, status: 'amended' })).toBe(false);
    expect(compiled.matches(observation)).toBe(true);
  });
});

const refusal = (criteria: string, opts?: { resourceType?: string }): FhirError => {
  try {
    compileCriteria(criteria, opts);
  } catch (err) {
    if (err instanceof FhirError) return err;
    throw err;
  }
  throw new Error(`${criteria} compiled`);
};

describe('compileCriteria: refusals', () => {
  it.each([
    ['Observation?subject:Patient.name=x', 'subject:Patient.name'],
    ['Observation?subject.name=x', 'subject.name'],
    ['Patient?_has:Observation:patient:code=x', '_has:Observation:patient:code'],
    ['Patient?_text=x', '_text'],
    ['Patient?_content=x', '_content'],
    ['Patient?_list=x', '_list'],
    ['Patient?_filter=name eq x', '_filter'],
    ['Patient?_count=10', '_count'],
    ['Patient?_sort=name', '_sort'],
    ['Observation?_include=Observation:subject', '_include'],
    ['Patient?_revinclude=Observation:subject', '_revinclude'],
    ['Patient?_summary=true', '_summary'],
    ['Patient?_elements=id', '_elements'],
    ['Observation?code:below=8867', 'code'],
    ['Observation?code:in=http://example.org/vs', 'code'],
    ['Location?near=42|-71|10|km', 'near'],
    [`Observation?code-value-quantity:missing=true`, 'code-value-quantity'],
  ])('%s', (criteria, param) => {
    const err = refusal(criteria);
    expect(err.code).toBe('subscription.criteria-unsupported');
    expect(err.status).toBe(400);
    expect(err.issueCode).toBe('invalid');
    expect(err.message).toContain(`'${param}'`);
  });

  it.each([
    ['Foo?x=1', undefined],
    ['code=8867-4', undefined],
    ['http://example.org/fhir/Patient?name=x', undefined],
    ['Patient?name=x', 'Observation'],
  ])('%s (type %s) is a criteria-type error', (criteria, resourceType) => {
    const err = refusal(criteria, resourceType ? { resourceType } : undefined);
    expect(err.code).toBe('subscription.criteria-type');
    expect(err.status).toBe(400);
  });

  it.each([
    ['Observation?date=notadate', 'search.bad-date'],
    ['Observation?foo=1', 'search.unknown-param'],
    ['Observation?value-quantity=abc', 'search.bad-number'],
    ['Observation?subject:missing=maybe', 'search.bad-missing'],
    ['Observation?code=,', 'search.empty-value'],
  ])('%s is the search’s own 400 (%s)', (criteria, code) => {
    const err = refusal(criteria);
    expect(err.code).toBe(code);
    expect(err.status).toBe(400);
  });
});
