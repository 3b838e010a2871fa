// Parity of the in-memory subscription matcher with the search (API.md §8, issue 26 point 2): for each search, the
// resources the search finds through HTTP are exactly those of the project for which compileCriteria(...).matches()
// is true; fixed searches over every parameter type, modifier and prefix, then random ones (fast-check).
// https://hl7.org/fhir/R4/subscription.html#2.46.6.1
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseJson } from '../../src/fhir/json/parse.js';
import { compileCriteria } from '../../src/fhir/subscriptions/match-search.js';
import type { Resource } from '../../src/fhir/types.js';
import { testDatabases } from '../support/db.js';
import { useProjectApp } from '../support/app.js';
import { emptySharedSet } from '../../src/fhir/conformance/shared-set.js';

const LOINC = 'http://loinc.org';
const UCUM = 'http://unitsofmeasure.org';
const SNOMED = 'http://snomed.info/sct';
const TAGS = 'http://example.org/tags';

type Json = Record<string, unknown>;

const loinc = (code: string, display?: string): Json => ({
  coding: [{ system: LOINC, code, ...(display ? { display } : {}) }],
});
const quantity = (value: number, code?: string, system: string | null = UCUM, unit?: string): Json => ({
  value,
  ...(unit ? { unit } : {}),
  ...(system ? { system } : {}),
  ...(code ? { code } : {}),
});

const FAMILIES = ['Smith', 'Smithson', 'Zoë-Martin', 'García', 'Jones', 'smith', 'Martinez', 'Lee'];
const GIVEN = ['Anna', 'Bob', 'Ana', 'Chloé', 'bobby', 'Dan', 'Eve', 'Ann'];
const BIRTH = ['1970', '1980-05', '1980-05-15', '1990-06-15', '2001-12-31', '1955-01-01', '1980', undefined];
const EFFECTIVE: Json[] = [
  { effectiveDateTime: '2024-02-10T08:30:00Z' },
  { effectiveDateTime: '2024-02-10T09:30:00+01:00' },
  { effectiveDateTime: '2024-02' },
  { effectiveDateTime: '2024-03-15' },
  { effectivePeriod: { start: '2024-01-20T10:00:00Z', end: '2024-02-20T10:00:00Z' } },
  { effectivePeriod: { start: '2024-03-01' } },
  { effectiveInstant: '2023-12-31T23:59:59.999Z' },
  {},
];
const CODES = [
  loinc('8867-4', 'Heart rate'),
  loinc('8480-6', 'Systolic blood pressure'),
  loinc('2339-0', 'Glucose'),
  { coding: [{ code: '8867-4' }], text: 'Heart beat' },
  loinc('85354-9', 'Blood pressure panel'),
];
const VALUES: Json[] = [
  { valueQuantity: quantity(72, '/min', UCUM, 'beats/minute') },
  { valueQuantity: quantity(120.5, 'mm[Hg]') },
  { valueQuantity: quantity(5.4, undefined, null, 'mmol/L') },
  { valueQuantity: quantity(98.6, '[degF]') },
  { valueQuantity: quantity(100, 'mg/dL') },
  { valueString: 'Normal finding' },
  { valueCodeableConcept: { coding: [{ system: SNOMED, code: '260385009', display: 'Negative' }] } },
  {},
  { valueQuantity: quantity(0.05, 'g') },
];

/** The resources of the project, as objects to send; `ref(kind, n)` reads the id of one created earlier. */
function fixtures(ref: (kind: string, n: number) => string): [string, Json][] {
  const out: [string, Json][] = [];
  for (let i = 0; i < 2; i++) {
    out.push(['org', { resourceType: 'Organization', name: i ? 'Beta Clinic' : 'Acme Health' }]);
  }
  for (let i = 0; i < 8; i++) {
    const birthDate = BIRTH[i];
    out.push([
      'patient',
      {
        resourceType: 'Patient',
        ...(i % 3 === 0 ? { meta: { tag: [{ system: TAGS, code: i ? 'vip' : 'new' }] } } : {}),
        ...(i % 4 === 3 ? {} : { active: i % 2 === 0 }),
        gender: ['female', 'male', 'other'][i % 3],
        ...(birthDate ? { birthDate } : {}),
        name: [{ family: FAMILIES[i], given: [GIVEN[i], ...(i % 2 ? ['Maria'] : [])] }],
        identifier: [
          { system: i % 2 ? 'http://example.org/mrn' : 'http://example.org/other', value: `X${i}` },
        ],
        ...(i < 5 ? { address: [{ city: i % 2 ? 'Springfield' : 'Shelbyville' }] } : {}),
        ...(i % 3 !== 2 ? { managingOrganization: { reference: `Organization/${ref('org', i % 2)}` } } : {}),
        ...(i === 4
          ? { generalPractitioner: [{ reference: 'https://other.example/fhir/Practitioner/dr9' }] }
          : {}),
        ...(i === 5 ? { deceasedDateTime: '2020-01-01' } : i === 6 ? { deceasedBoolean: false } : {}),
      },
    ]);
  }
  for (let i = 0; i < 24; i++) {
    const code = CODES[i % CODES.length] as Json;
    out.push([
      'observation',
      {
        resourceType: 'Observation',
        ...(i % 7 === 0 ? { meta: { tag: [{ system: TAGS, code: 'vip' }] } } : {}),
        status: ['final', 'preliminary', 'amended'][i % 3],
        category: [
          {
            coding: [
              {
                system: 'http://terminology.hl7.org/CodeSystem/observation-category',
                code: i % 2 ? 'vital-signs' : 'laboratory',
              },
            ],
          },
        ],
        code,
        ...(i % 6 === 5 ? {} : { subject: { reference: `Patient/${ref('patient', i % 8)}` } }),
        ...(i % 4 === 1 ? { performer: [{ reference: `Organization/${ref('org', 0)}` }] } : {}),
        ...EFFECTIVE[i % EFFECTIVE.length],
        ...(code === CODES[4]
          ? {
              component: [
                { code: loinc('8480-6'), valueQuantity: quantity(110 + 10 * (i % 4), 'mm[Hg]') },
                { code: loinc('8462-4'), valueQuantity: quantity(70 + 10 * (i % 3), 'mm[Hg]') },
              ],
            }
          : VALUES[i % VALUES.length]),
      },
    ]);
  }
  // A SampledData value (no quantity) and components with a coded value (the combo- and component- composites).
  out.push([
    'observation',
    {
      resourceType: 'Observation',
      status: 'final',
      code: loinc('8867-4'),
      valueSampledData: { origin: { value: 72 }, period: 1, dimensions: 1, data: '1 2' },
    },
  ]);
  out.push([
    'observation',
    {
      resourceType: 'Observation',
      status: 'final',
      code: loinc('72166-2'),
      valueCodeableConcept: { coding: [{ system: SNOMED, code: '8517006' }] },
      component: [
        { code: loinc('8480-6'), valueCodeableConcept: { coding: [{ system: SNOMED, code: '260385009' }] } },
        { code: loinc('8462-4'), valueQuantity: quantity(72, 'mm[Hg]') },
      ],
    },
  ]);
  for (let i = 0; i < 5; i++) {
    out.push([
      'encounter',
      {
        resourceType: 'Encounter',
        status: ['finished', 'in-progress', 'planned'][i % 3],
        class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: i % 2 ? 'AMB' : 'IMP' },
        subject: { reference: `Patient/${ref('patient', i)}` },
        period:
          i === 4
            ? { start: '2024-01-05T09:00:00Z' }
            : { start: `2024-0${i + 1}-03`, end: `2024-0${i + 1}-04` },
        ...(i % 2 ? { length: quantity(i * 0.75, 'd', UCUM, 'd') } : {}),
      },
    ]);
  }
  for (let i = 0; i < 4; i++) {
    out.push([
      'risk',
      {
        resourceType: 'RiskAssessment',
        status: 'final',
        subject: { reference: `Patient/${ref('patient', i)}` },
        prediction: [{ probabilityDecimal: [0.25, 0.3, 0.75, 0.05][i] }],
      },
    ]);
  }
  for (let i = 0; i < 3; i++) {
    out.push([
      'valueset',
      {
        resourceType: 'ValueSet',
        status: 'active',
        url: ['http://example.org/fhir/ValueSet/a', 'http://example.org/fhir/ValueSet/a/v2', 'urn:oid:1.2.3'][
          i
        ],
      },
    ]);
  }
  return out;
}

/** Searches with `{kind:n}` placeholders (ids of created resources), written unencoded as in a Subscription. */
const SEARCHES = [
  'Patient?name=smith',
  'Patient?family=smi',
  'Patient?family:exact=Smith',
  'Patient?family:contains=mart',
  'Patient?name=zoe',
  'Patient?given=ann,bob',
  'Patient?name=bob maria',
  'Patient?gender=female',
  'Patient?gender:not=female',
  'Patient?active=true',
  'Patient?active:missing=true',
  'Patient?birthdate=1980',
  'Patient?birthdate=ge1980-05-15',
  'Patient?birthdate=lt1990',
  'Patient?birthdate=ap1990-06',
  'Patient?birthdate=sa1980&birthdate=eb2001-12-31',
  'Patient?birthdate=ne1980-05',
  'Patient?birthdate:missing=true',
  'Patient?identifier=http://example.org/mrn|',
  'Patient?identifier=X3,X4',
  'Patient?organization=Organization/{org:0}',
  'Patient?organization={org:1}',
  'Patient?organization:missing=true',
  'Patient?general-practitioner=Practitioner/dr9',
  'Patient?_tag=http://example.org/tags|vip',
  'Patient?_tag:not=vip',
  'Patient?_id={patient:0},{patient:2}',
  'Patient?_id:not={patient:0}',
  'Patient?address-city=spring',
  'Patient?deceased=true',
  'Patient?_lastUpdated=gt2000-01-01',
  'Patient?_lastUpdated=lt2000',
  'Observation?code=http://loinc.org|8867-4',
  'Observation?code=8480-6,2339-0',
  'Observation?code=|8867-4',
  'Observation?code:not=http://loinc.org|8867-4',
  'Observation?code:text=heart',
  'Observation?status=final&code=http://loinc.org|',
  'Observation?subject=Patient/{patient:0}',
  'Observation?patient={patient:1}',
  'Observation?subject:missing=true',
  'Observation?performer:missing=false',
  'Observation?date=2024',
  'Observation?date=2024-02-10T08:30:00Z',
  'Observation?date=ge2024-02-10T08:00:00Z',
  'Observation?date=lt2024-02-01&status=final,amended',
  'Observation?date=ap2024-03-15',
  'Observation?date=eb2024-02-15',
  'Observation?date=sa2024-02-15',
  'Observation?date=le2024-02-10T10:30:00+02:00',
  'Observation?value-quantity=72',
  'Observation?value-quantity=gt100',
  'Observation?value-quantity=le98.6',
  'Observation?value-quantity=ap100',
  'Observation?value-quantity=72|http://unitsofmeasure.org|/min',
  'Observation?value-quantity=5.4||mmol/L',
  'Observation?value-quantity=ne72',
  'Observation?value-quantity=5e-2',
  'Observation?component-code-value-quantity=http://loinc.org|8480-6$gt125',
  'Observation?component-code-value-quantity=http://loinc.org|8462-4$lt75,http://loinc.org|8480-6$130',
  'Observation?code-value-quantity=http://loinc.org|8867-4$lt80',
  'Observation?code-value-quantity=8867-4$72',
  'Observation?code-value-concept=http://loinc.org|72166-2$http://snomed.info/sct|8517006',
  'Observation?code-value-concept=72166-2$260385009',
  'Observation?combo-code-value-quantity=8480-6$gt115',
  'Observation?combo-code-value-quantity=8462-4$72,8867-4$72',
  'Observation?combo-code-value-concept=8480-6$260385009',
  'Observation?combo-code-value-concept=http://loinc.org|$http://snomed.info/sct|',
  'Observation?component-code-value-concept=8480-6$260385009',
  'Observation?combo-code=8480-6',
  'Observation?combo-code=http://loinc.org|8462-4',
  'Observation?combo-code:not=8480-6',
  'Observation?combo-code:text=heart',
  'Observation?combo-value-quantity=gt100',
  'Observation?combo-value-quantity=72|http://unitsofmeasure.org|mm[Hg]',
  'Observation?combo-value-concept=260385009',
  'Observation?combo-value-quantity:missing=true',
  'Observation?value-string=norm',
  'Observation?value-concept=http://snomed.info/sct|260385009',
  'Observation?category=vital-signs&_tag=vip',
  'Encounter?status=finished,in-progress',
  'Encounter?class=AMB',
  'Encounter?date=2024-01',
  'Encounter?date=gt2025',
  'Encounter?length=gt1',
  'Encounter?length=0.75',
  'Encounter?subject=Patient/{patient:0}',
  'RiskAssessment?probability=gt0.5',
  'RiskAssessment?probability=0.25',
  'RiskAssessment?probability=ap0.3',
  'RiskAssessment?probability=le0.05',
  'ValueSet?url=http://example.org/fhir/ValueSet/a',
  'ValueSet?url:below=http://example.org/fhir',
  'ValueSet?url:above=http://example.org/fhir/ValueSet/a/v2/x',
  'ValueSet?url:missing=false',
];

/** `Type?query` as a request path: each value percent-encoded (a `+` is a plus, as compileCriteria reads it). */
function searchPath(criteria: string): string {
  const [type, query = ''] = criteria.split('?') as [string, string?];
  const params = query
    .split('&')
    .filter(Boolean)
    .map((p) => {
      const eq = p.indexOf('=');
      return `${p.slice(0, eq)}=${encodeURIComponent(p.slice(eq + 1))}`;
    });
  return `${type}?${[...params, '_count=1000'].join('&')}`;
}

describe.each(testDatabases())('subscription matching = search on $name', (database) => {
  // Parity concerns the project's own resources: no shared conformance resources join its ValueSet searches.
  const ctx = useProjectApp(database, {}, { sharedConformance: emptySharedSet() });
  const ids: Record<string, string[]> = {};
  const resources: Resource[] = [];
  const ref = (kind: string, n: number): string => ids[kind]?.[n] as string;
  const fill = (criteria: string): string =>
    criteria.replace(/\{(\w+):(\d+)\}/g, (_, kind: string, n: string) => ref(kind, Number(n)));

  /** The ids the search finds and the ids the matcher accepts among every resource created. */
  const compare = async (criteria: string): Promise<{ searched: string[]; matched: string[] }> => {
    const res = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/${searchPath(criteria)}`,
      token: ctx.token,
    });
    expect(res.statusCode, `${criteria}: ${res.body}`).toBe(200);
    const bundle = res.json() as { entry?: { resource: Resource }[]; link?: { relation: string }[] };
    expect(bundle.link?.some((l) => l.relation === 'next')).toBeFalsy();
    const searched = (bundle.entry ?? []).map((e) => e.resource.id as string).sort();
    const compiled = compileCriteria(criteria);
    const matched = resources
      .filter((r) => compiled.matches(r))
      .map((r) => r.id as string)
      .sort();
    return { searched, matched };
  };

  beforeAll(async () => {
    for (const [kind, resource] of fixtures(ref)) {
      // Sent as text: a decimal such as 98.60 keeps its form, and the answer is parsed keeping it too.
      const text = JSON.stringify(resource).replace(/"value":98\.6\b/, '"value":98.60');
      const res = await ctx.t.request({
        method: 'POST',
        url: `${ctx.t.fhir}/${String(resource.resourceType)}`,
        token: ctx.token,
        headers: { 'content-type': 'application/fhir+json' },
        payload: text,
      });
      expect(res.statusCode, res.body).toBe(201);
      const stored = parseJson(res.body) as Resource;
      (ids[kind] ??= []).push(stored.id as string);
      resources.push(stored);
    }
  });

  it('finds with the matcher exactly what each search finds', async () => {
    let selective = 0;
    for (const template of SEARCHES) {
      const criteria = fill(template);
      const { searched, matched } = await compare(criteria);
      expect(matched, criteria).toEqual(searched);
      const ofType = resources.filter((r) => r.resourceType === criteria.split('?')[0]).length;
      if (searched.length > 0 && searched.length < ofType) selective++;
    }
    // Not vacuous: most searches keep some resources of their type and leave others.
    expect(selective).toBeGreaterThan(SEARCHES.length * 0.75);
  });

  it('agrees with random Observation searches (fast-check)', async () => {
    const prefix = fc.constantFrom('', 'eq', 'ne', 'gt', 'lt', 'ge', 'le', 'sa', 'eb', 'ap');
    const dateValue = fc.constantFrom(
      '2024',
      '2024-02',
      '2024-02-10',
      '2024-02-10T08:30:00Z',
      '2024-02-10T09:30:00+01:00',
      '2024-03-01',
      '2023-12-31T23:59:59.999Z',
    );
    const numberValue = fc.constantFrom('72', '98.6', '98.60', '100', '5.4', '120.5', '0.05', '1e2', '0');
    const unit = fc.constantFrom('', `|${UCUM}|mm[Hg]`, '||mmol/L', `|${UCUM}|`, '||beats/minute');
    const token = fc.constantFrom(`${LOINC}|8867-4`, '8867-4', '|8867-4', `${LOINC}|`, '8480-6', '85354-9');
    const component = fc.tuple(prefix, fc.constantFrom('110', '120', '80', '125'));
    const params: [string, fc.Arbitrary<string>][] = [
      ['date', fc.tuple(prefix, dateValue).map(([p, v]) => `${p}${v}`)],
      ['value-quantity', fc.tuple(prefix, numberValue, unit).map(([p, v, u]) => `${p}${v}${u}`)],
      ['code', token],
      ['code:not', token],
      ['status', fc.constantFrom('final', 'amended', 'preliminary')],
      ['code:text', fc.constantFrom('heart', 'blood', 'gluc')],
      ['component-code-value-quantity', component.map(([p, v]) => `${LOINC}|8480-6$${p}${v}`)],
      ['combo-code-value-quantity', fc.tuple(token, prefix, numberValue).map(([t, p, v]) => `${t}$${p}${v}`)],
      ['code-value-quantity', fc.tuple(token, prefix, numberValue).map(([t, p, v]) => `${t}$${p}${v}`)],
      ['combo-code', token],
      ['combo-code:not', token],
      ['combo-value-quantity', fc.tuple(prefix, numberValue, unit).map(([p, v, u]) => `${p}${v}${u}`)],
      [
        'combo-code-value-concept',
        fc
          .tuple(
            fc.constantFrom('8480-6', '72166-2', `${LOINC}|`, '8867-4'),
            fc.constantFrom('260385009', '8517006', `${SNOMED}|`),
          )
          .map(([t, c]) => `${t}$${c}`),
      ],
    ];
    // One parameter with one or two values (OR).
    const filter = fc.oneof(
      ...params.map(([key, value]) =>
        fc.array(value, { minLength: 1, maxLength: 2 }).map((vs) => `${key}=${vs.join(',')}`),
      ),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(filter, { minLength: 1, maxLength: 3 }), async (filters) => {
        const criteria = `Observation?${filters.join('&')}`;
        const { searched, matched } = await compare(criteria);
        expect(matched, criteria).toEqual(searched);
      }),
      { numRuns: 60, seed: 26 },
    );
  });

  it('agrees with random Patient searches (fast-check)', async () => {
    const prefix = fc.constantFrom('', 'eq', 'ne', 'gt', 'lt', 'ge', 'le', 'sa', 'eb', 'ap');
    const text = fc.constantFrom(
      'smith',
      'Smith',
      'zoe',
      'Zoë-Martin',
      'mart',
      'an',
      'bob',
      'garcia',
      'maria',
    );
    const params: [string, fc.Arbitrary<string>][] = [
      ['name', text],
      ['family', text],
      ['family:exact', text],
      ['given:contains', text],
      [
        'birthdate',
        fc
          .tuple(prefix, fc.constantFrom('1980', '1980-05', '1980-05-15', '1990-06-15', '2001'))
          .map(([p, v]) => `${p}${v}`),
      ],
      ['gender', fc.constantFrom('female', 'male', 'other')],
      ['gender:not', fc.constantFrom('female', 'male')],
      ['active', fc.constantFrom('true', 'false')],
      ['_tag', fc.constantFrom(`${TAGS}|vip`, 'new', `${TAGS}|`)],
      ['identifier', fc.constantFrom('X1', 'http://example.org/mrn|', 'http://example.org/other|X2', '|X1')],
      ['address-city', fc.constantFrom('spring', 'shelby', 'x')],
    ];
    const filter = fc.oneof(
      ...params.map(([key, value]) =>
        fc.array(value, { minLength: 1, maxLength: 2 }).map((vs) => `${key}=${vs.join(',')}`),
      ),
      fc
        .constantFrom('active', 'birthdate', 'address-city', '_tag')
        .chain((key) => fc.boolean().map((b) => `${key}:missing=${b}`)),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(filter, { minLength: 1, maxLength: 3 }), async (filters) => {
        const criteria = `Patient?${filters.join('&')}`;
        const { searched, matched } = await compare(criteria);
        expect(matched, criteria).toEqual(searched);
      }),
      { numRuns: 60, seed: 26 },
    );
  });
});
