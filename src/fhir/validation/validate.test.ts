import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { KNOWN_BAD_EXAMPLES } from '../../../test/support/known-invalid-examples.js';
import { readSyntheaBundles } from '../../../test/support/synthea.js';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { isResourceType } from '../definitions/index.js';
import { FhirError, type OperationOutcomeIssue } from '../outcome.js';
import { compileSpecRegex } from './primitives.js';
import { assertValid, validateResource } from './validate.js';

/** `code expression: text` of each issue, compact for assertions. */
function summary(resource: unknown): string[] {
  return validateResource(resource).map(short);
}
function short(i: OperationOutcomeIssue): string {
  return `${i.code} ${i.expression?.join(',')}: ${i.details?.text}`;
}
/** The expressions of the issues. */
function where(resource: unknown): string[] {
  return validateResource(resource).map((i) => i.expression?.[0] ?? '');
}

describe('validateResource: rules', () => {
  it('accepts a valid resource', () => {
    expect(
      summary({
        resourceType: 'Patient',
        id: 'p-1.a',
        meta: { versionId: '1', lastUpdated: '2024-01-02T03:04:05.678Z', project: 'abc-123' },
        name: [{ family: 'Doe', given: ['Jane', 'Q'] }],
        birthDate: '2024-02-29',
        deceasedBoolean: false,
        multipleBirthInteger: 2,
        text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">Jane</div>' },
        extension: [{ url: 'http://example.org/x', valueDecimal: 1.5 }],
      }),
    ).toEqual([]);
  });

  it('rejects unknown elements', () => {
    expect(summary({ resourceType: 'Patient', foo: 1 })).toEqual([
      "structure Patient.foo: Unknown element 'foo'",
    ]);
    expect(where({ resourceType: 'Patient', name: [{ family: 'x' }, { given: ['a'], nick: 'b' }] })).toEqual([
      'Patient.name[1].nick',
    ]);
    // resourceType only belongs to resources.
    expect(where({ resourceType: 'Patient', name: [{ resourceType: 'HumanName' }] })).toEqual([
      'Patient.name[0].resourceType',
    ]);
  });

  it('rejects wrong JSON types for primitives', () => {
    expect(summary({ resourceType: 'Patient', active: 'true' })).toEqual([
      'value Patient.active: Expected boolean, got a JSON string',
    ]);
    expect(where({ resourceType: 'Patient', multipleBirthInteger: 1.5 })).toEqual([
      'Patient.multipleBirthInteger',
    ]);
    expect(where({ resourceType: 'Patient', multipleBirthInteger: '1' })).toEqual([
      'Patient.multipleBirthInteger',
    ]);
    expect(where({ resourceType: 'Patient', multipleBirthInteger: 2 ** 31 })).toEqual([
      'Patient.multipleBirthInteger',
    ]);
    expect(where({ resourceType: 'Patient', name: [{ family: 3 }] })).toEqual(['Patient.name[0].family']);
    expect(
      where({
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'x' },
        valueQuantity: { value: '1' },
      }),
    ).toEqual(['Observation.valueQuantity.value']);
    expect(where({ resourceType: 'Patient', name: 'Jane' })).toEqual(['Patient.name', 'Patient.name']);
  });

  it('checks primitive formats', () => {
    const birth = (birthDate: unknown) => where({ resourceType: 'Patient', birthDate });
    expect(birth('2023-02-30')).toEqual(['Patient.birthDate']);
    expect(summary({ resourceType: 'Patient', birthDate: '2023-02-30' })).toEqual([
      "value Patient.birthDate: Invalid date: '2023-02-30'",
    ]);
    expect(birth('2023-02-29')).toEqual(['Patient.birthDate']);
    expect(birth('2000-02-29')).toEqual([]);
    expect(birth('1900-02-29')).toEqual(['Patient.birthDate']);
    expect(birth('2023-04-31')).toEqual(['Patient.birthDate']);
    expect(birth('2023-13')).toEqual(['Patient.birthDate']);
    expect(birth('2023')).toEqual([]);
    expect(birth('2023-06')).toEqual([]);
    expect(birth('2023-06-01T00:00:00Z')).toEqual(['Patient.birthDate']);

    const deceased = (deceasedDateTime: unknown) => where({ resourceType: 'Patient', deceasedDateTime });
    expect(deceased('2023-06-01T10:20:30+02:00')).toEqual([]);
    expect(deceased('2023-06-01T10:20:30.123Z')).toEqual([]);
    expect(deceased('2023-06-01T10:20')).toEqual(['Patient.deceasedDateTime']); // seconds are required
    expect(deceased('2023-06-01T10:20:30')).toEqual(['Patient.deceasedDateTime']); // so is the time zone
    expect(deceased('2023-06-31T10:20:30Z')).toEqual(['Patient.deceasedDateTime']);

    const instant = (lastUpdated: unknown) => where({ resourceType: 'Patient', meta: { lastUpdated } });
    expect(instant('2023-06-01T10:20:30Z')).toEqual([]);
    expect(instant('2023-06-01')).toEqual(['Patient.meta.lastUpdated']);

    const id = (v: unknown) => where({ resourceType: 'Patient', id: v });
    expect(id('abc-DEF.123')).toEqual([]);
    expect(id('a'.repeat(64))).toEqual([]);
    expect(id('a'.repeat(65))).toEqual(['Patient.id']);
    expect(id('a_b')).toEqual(['Patient.id']);
    expect(id('a b')).toEqual(['Patient.id']);

    expect(where({ resourceType: 'Patient', gender: ' male' })).toEqual(['Patient.gender']); // code
    expect(where({ resourceType: 'Patient', gender: 'male ' })).toEqual(['Patient.gender']);
    expect(where({ resourceType: 'Patient', implicitRules: 'http://a b' })).toEqual([
      'Patient.implicitRules',
    ]); // uri
    expect(where({ resourceType: 'Patient', identifier: [{ system: 'urn:oid:1.2.3' }] })).toEqual([]);
    const ext = (value: Record<string, unknown>) =>
      where({ resourceType: 'Patient', extension: [{ url: 'http://e', ...value }] });
    expect(ext({ valueOid: 'urn:oid:1.2.3' })).toEqual([]);
    expect(ext({ valueOid: 'urn:oid:1.02' })).toEqual(['Patient.extension[0].valueOid']);
    expect(ext({ valueUuid: 'urn:uuid:c757873d-ec9a-4326-a141-556f43239520' })).toEqual([]);
    expect(ext({ valueUuid: 'c757873d-ec9a-4326-a141-556f43239520' })).toEqual([
      'Patient.extension[0].valueUuid',
    ]);
    expect(ext({ valueTime: '10:20:30' })).toEqual([]);
    expect(ext({ valueTime: '24:00:00' })).toEqual(['Patient.extension[0].valueTime']);
    expect(ext({ valuePositiveInt: 0 })).toEqual(['Patient.extension[0].valuePositiveInt']);
    expect(ext({ valueUnsignedInt: 0 })).toEqual([]);
    expect(ext({ valueUnsignedInt: -1 })).toEqual(['Patient.extension[0].valueUnsignedInt']);
    expect(ext({ valueDecimal: 1e3 })).toEqual([]);
    expect(ext({ valueBase64Binary: 'aGVsbG8=' })).toEqual([]);
    expect(ext({ valueBase64Binary: 'aGVs\nbG8=' })).toEqual([]);
    expect(ext({ valueBase64Binary: 'aGVsbG8' })).toEqual(['Patient.extension[0].valueBase64Binary']);
    expect(ext({ valueBase64Binary: 'aGVsbG8*' })).toEqual(['Patient.extension[0].valueBase64Binary']);
    expect(ext({ valueMarkdown: 'a\u00a0b\n' })).toEqual([]); // Unicode spaces are fine in strings
    expect(where({ resourceType: 'Patient', text: { status: 'generated', div: '<p>x</p>' } })).toEqual([
      'Patient.text.div',
    ]);
  });

  it('enforces max cardinality 1 and repeating elements', () => {
    expect(summary({ resourceType: 'Patient', gender: ['male'] })).toEqual([
      "structure Patient.gender: Element 'gender' must not be an array (max cardinality 1)",
    ]);
    expect(where({ resourceType: 'Patient', name: { family: 'Doe' } })).toEqual(['Patient.name']);
    expect(summary({ resourceType: 'Patient', name: [{ given: 'Jane' }] })).toEqual([
      "structure Patient.name[0].given: Element 'given' must be an array (max cardinality *)",
    ]);
  });

  it('requires min ≥ 1 elements, nested ones only when the parent is present', () => {
    expect(summary({ resourceType: 'Observation' })).toEqual([
      "required Observation.status: Missing required element 'status'",
      "required Observation.code: Missing required element 'code'",
    ]);
    expect(where({ resourceType: 'Observation', code: { text: 'x' } })).toEqual(['Observation.status']);
    // A primitive present only through its extension counts.
    expect(
      where({
        resourceType: 'Observation',
        _status: {
          extension: [
            { url: 'http://hl7.org/fhir/StructureDefinition/data-absent-reason', valueCode: 'unknown' },
          ],
        },
        code: { text: 'x' },
      }),
    ).toEqual([]);
    expect(where({ resourceType: 'Patient' })).toEqual([]); // Patient.link.other is required only inside a link
    expect(where({ resourceType: 'Patient', link: [{ type: 'seealso' }] })).toEqual([
      'Patient.link[0].other',
    ]);
    expect(
      where({
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'x' },
        component: [{ valueString: 'a' }],
      }),
    ).toEqual(['Observation.component[0].code']);
    expect(where({ resourceType: 'Patient', extension: [{ valueString: 'a' }] })).toEqual([
      'Patient.extension[0].url',
    ]);
    expect(where({ resourceType: 'Project', setting: [{ name: 'a' }] })).toEqual([
      'Project.setting[0].value[x]',
    ]);
  });

  it('checks choice elements', () => {
    const obs = { resourceType: 'Observation', status: 'final', code: { text: 'x' } };
    expect(summary({ ...obs, valueString: 'a', valueQuantity: { value: 1 } })).toEqual([
      "structure Observation.valueQuantity: Only one of 'valueString' and 'valueQuantity' may be present (value[x])",
    ]);
    expect(where({ ...obs, valueString: 'a', _valueBoolean: { id: 'x' } })).toEqual([
      'Observation._valueBoolean',
    ]);
    expect(summary({ ...obs, valueFoo: 'a' })).toEqual([
      "structure Observation.valueFoo: Unknown element 'valueFoo'",
    ]);
    expect(where({ ...obs, valueAddress: { city: 'a' } })).toEqual(['Observation.valueAddress']); // not allowed here
    expect(where({ ...obs, valuestring: 'a' })).toEqual(['Observation.valuestring']);
    expect(where({ ...obs, value: 'a' })).toEqual(['Observation.value']);
    expect(where({ ...obs, valueDateTime: '2023-01-01', effectivePeriod: { start: '2023-01-01' } })).toEqual(
      [],
    );
  });

  it('rejects empty strings, nulls, empty objects and empty arrays', () => {
    expect(summary({ resourceType: 'Patient', name: [{ family: '' }] })).toEqual([
      'value Patient.name[0].family: Empty string is not allowed',
    ]);
    expect(summary({ resourceType: 'Patient', gender: null })).toEqual([
      'structure Patient.gender: Null values are not allowed',
    ]);
    expect(summary({ resourceType: 'Patient', name: [{ given: ['a', null] }] })).toEqual([
      'structure Patient.name[0].given[1]: Null values are not allowed',
    ]);
    expect(summary({ resourceType: 'Patient', name: [{}] })).toEqual([
      'structure Patient.name[0]: Empty object is not allowed',
    ]);
    expect(summary({ resourceType: 'Patient', maritalStatus: {} })).toEqual([
      'structure Patient.maritalStatus: Empty object is not allowed',
    ]);
    expect(summary({ resourceType: 'Patient', name: [] })).toEqual([
      'structure Patient.name: Empty array is not allowed',
    ]);
    expect(where({ resourceType: 'Patient', name: [null] })).toEqual(['Patient.name[0]']);
  });

  it('accepts _element primitive extension siblings, loosely checked', () => {
    const ext = { extension: [{ url: 'http://example.org/e', valueString: 'x' }] };
    expect(
      summary({
        resourceType: 'Patient',
        birthDate: '1970-01-01',
        _birthDate: ext,
        _gender: { id: 'g1' },
        name: [
          { given: ['a', null, 'c'], _given: [null, ext, null] },
          { _family: ext, _given: [ext] },
        ],
      }),
    ).toEqual([]);
    expect(where({ resourceType: 'Patient', _birthDate: { foo: 1 } })).toEqual(['Patient._birthDate.foo']);
    expect(where({ resourceType: 'Patient', _birthDate: 'x' })).toEqual(['Patient._birthDate']);
    expect(where({ resourceType: 'Patient', _birthDate: [ext] })).toEqual(['Patient._birthDate']);
    expect(where({ resourceType: 'Patient', name: [{ given: ['a'], _given: ext }] })).toEqual([
      'Patient.name[0]._given',
    ]);
    expect(where({ resourceType: 'Patient', name: [{ given: ['a'], _given: [ext, ext] }] })).toEqual([
      'Patient.name[0]._given',
    ]);
    expect(where({ resourceType: 'Patient', name: [{ given: ['a', null], _given: [ext, null] }] })).toEqual([
      'Patient.name[0].given[1]',
    ]);
    expect(where({ resourceType: 'Patient', _name: ext })).toEqual(['Patient._name']); // not a primitive
    expect(where({ resourceType: 'Patient', _foo: ext })).toEqual(['Patient._foo']);
  });

  it('validates contained resources and Bundle/Parameters resources as their own type', () => {
    expect(
      summary({
        resourceType: 'Patient',
        contained: [
          { resourceType: 'Organization', id: 'o1', name: 'Org' },
          { resourceType: 'Practitioner', id: 'p1', name: [{ given: ['a', 3] }] },
        ],
      }),
    ).toEqual([
      'value Patient.contained[1].name[0].given[1]: Expected string (a JSON string), got a JSON number',
    ]);
    expect(where({ resourceType: 'Patient', contained: [{ id: 'x' }] })).toEqual([
      'Patient.contained[0].resourceType',
    ]);
    expect(summary({ resourceType: 'Patient', contained: [{ resourceType: 'Nope' }] })).toEqual([
      'value Patient.contained[0].resourceType: Unknown resource type: Nope',
    ]);
    expect(
      summary({
        resourceType: 'Bundle',
        type: 'collection',
        entry: [
          { fullUrl: 'urn:uuid:c757873d-ec9a-4326-a141-556f43239520', resource: { resourceType: 'Patient' } },
          { resource: { resourceType: 'Observation', code: { text: 'x' }, foo: true } },
        ],
      }),
    ).toEqual([
      "structure Bundle.entry[1].resource.foo: Unknown element 'foo'",
      "required Bundle.entry[1].resource.status: Missing required element 'status'",
    ]);
    expect(
      where({
        resourceType: 'Bundle',
        type: 'batch-response',
        entry: [
          {
            response: {
              status: '200',
              outcome: { resourceType: 'OperationOutcome', issue: [{ severity: 'x' }] },
            },
          },
        ],
      }),
    ).toEqual(['Bundle.entry[0].response.outcome.issue[0].code']);
    expect(
      where({
        resourceType: 'Parameters',
        parameter: [
          { name: 'a', resource: { resourceType: 'Patient', active: 1 } },
          { name: 'b', part: [{ name: 'c', valueString: '' }] },
        ],
      }),
    ).toEqual(['Parameters.parameter[0].resource.active', 'Parameters.parameter[1].part[0].valueString']);
  });

  it('follows contentReference elements (Questionnaire.item.item)', () => {
    expect(
      summary({
        resourceType: 'Questionnaire',
        status: 'active',
        item: [
          {
            linkId: '1',
            type: 'group',
            item: [{ linkId: '1.1', type: 'group', item: [{ type: 'string' }] }],
          },
        ],
      }),
    ).toEqual(["required Questionnaire.item[0].item[0].item[0].linkId: Missing required element 'linkId'"]);
  });

  it('accepts the Medplum service resource types with their elements', () => {
    const ref = (reference: string) => ({ reference });
    const cases: unknown[] = [
      {
        resourceType: 'Project',
        id: 'p1',
        name: 'Test',
        owner: ref('User/u1'),
        strictMode: true,
        features: ['bots'],
        setting: [{ name: 'a', valueBoolean: true }],
        secret: [{ name: 's', valueString: 'x' }],
      },
      {
        resourceType: 'ProjectMembership',
        project: ref('Project/p1'),
        user: ref('User/u1'),
        profile: ref('Practitioner/pr1'),
        admin: true,
        access: [{ policy: ref('AccessPolicy/a1'), parameter: [{ name: 'x', valueString: 'y' }] }],
      },
      {
        resourceType: 'ClientApplication',
        name: 'app',
        secret: 'abc',
        redirectUri: 'https://example.org/cb',
        identityProvider: {
          authorizeUrl: 'a',
          tokenUrl: 't',
          userInfoUrl: 'u',
          clientId: 'c',
          clientSecret: 's',
        },
      },
      {
        resourceType: 'User',
        firstName: 'A',
        lastName: 'B',
        email: 'a@example.org',
        passwordHash: '$2a$10$x',
        project: ref('Project/p1'),
      },
      {
        resourceType: 'AsyncJob',
        status: 'accepted',
        requestTime: '2024-01-01T00:00:00Z',
        request: 'https://example.org/fhir/$export',
        output: { resourceType: 'Parameters', parameter: [{ name: 'x', valueString: 'y' }] },
      },
      {
        resourceType: 'Login',
        user: ref('User/u1'),
        authMethod: 'password',
        authTime: '2024-01-01T00:00:00Z',
        scope: 'openid',
        granted: true,
      },
    ];
    for (const r of cases) expect(summary(r)).toEqual([]);
    expect(where({ resourceType: 'User', firstName: 'A' })).toEqual(['User.lastName']);
    expect(where({ resourceType: 'ClientApplication', identityProvider: { authorizeUrl: 'a' } })).toEqual([
      'ClientApplication.identityProvider.tokenUrl',
      'ClientApplication.identityProvider.userInfoUrl',
      'ClientApplication.identityProvider.clientId',
    ]);
    // API.md §2: clientSecret is optional (Medplum's definition requires it).
    expect(
      where({
        resourceType: 'ClientApplication',
        identityProvider: { authorizeUrl: 'a', tokenUrl: 't', userInfoUrl: 'u', clientId: 'c' },
      }),
    ).toEqual([]);
    expect(
      where({
        resourceType: 'AsyncJob',
        status: 'accepted',
        requestTime: '2024-01-01T00:00:00Z',
        request: 'x',
        output: { resourceType: 'Patient' },
      }),
    ).toEqual(['AsyncJob.output.resourceType']);
  });

  it('accepts Cinder/Medplum meta elements (meta.project as a bare id string, meta.author)', () => {
    expect(
      summary({
        resourceType: 'Observation',
        meta: { project: '0f1c2d3e-aaaa-4bbb-8ccc-123456789abc', author: { reference: 'Practitioner/1' } },
        status: 'final',
        code: { text: 'x' },
      }),
    ).toEqual([]);
    expect(where({ resourceType: 'Patient', meta: { project: 1 } })).toEqual(['Patient.meta.project']);
  });

  it('rejects unknown or missing resource types and non-objects', () => {
    expect(summary({ resourceType: 'Foo' })).toEqual(['value resourceType: Unknown resource type: Foo']);
    expect(summary({ resourceType: 'Bot', name: 'x' })).toEqual([
      'value resourceType: Unknown resource type: Bot',
    ]);
    expect(summary({ resourceType: 'DomainResource' })).toEqual([
      'value resourceType: Unknown resource type: DomainResource',
    ]);
    expect(summary({ id: 'x' })).toEqual(['required resourceType: Missing resourceType']);
    expect(summary([])).toEqual(['structure Resource: A resource must be a JSON object']);
    expect(summary('Patient')).toEqual(['structure Resource: A resource must be a JSON object']);
  });

  it('assertValid throws a FhirError with every issue', () => {
    expect(() => assertValid({ resourceType: 'Patient', gender: 'male' })).not.toThrow();
    let error: unknown;
    try {
      assertValid({ resourceType: 'Observation', foo: 1 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(FhirError);
    const fe = error as FhirError;
    expect(fe.issueCode).toBe('invalid');
    expect(fe.code).toBe('validation.failed');
    expect(fe.status).toBe(400);
    expect(fe.message).toBe("Unknown element 'foo' (and 2 more)");
    expect(fe.issues.map((i) => i.expression?.[0])).toEqual([
      'Observation.foo',
      'Observation.status',
      'Observation.code',
    ]);
    expect(fe.toOutcome().issue).toHaveLength(3);
    try {
      assertValid({ resourceType: 'Patient', foo: 1 });
    } catch (e) {
      expect((e as FhirError).message).toBe("Unknown element 'foo'");
    }
  });

  it('compiles the spec regexes with XML Schema whitespace semantics', () => {
    expect(compileSpecRegex('[ \\r\\n\\t\\S]+').test('a\u00a0\n')).toBe(true);
    expect(compileSpecRegex('[ \\r\\n\\t\\S]+').test('')).toBe(false);
    const code = compileSpecRegex('[^\\s]+(\\s[^\\s]+)*');
    expect(code.test('a b')).toBe(true);
    expect(code.test('a  b')).toBe(false);
    expect(code.test(' a')).toBe(false);
    expect(compileSpecRegex('\\S*').test('a\u00a0b')).toBe(true);
    expect(compileSpecRegex('\\S*').test('a b')).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Real data: the official HL7 R4 examples and Synthea bundles.

const require = createRequire(import.meta.url);
const EXAMPLES_DIR = dirname(require.resolve('hl7.fhir.r4.examples/package.json'));
const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const SYNTHEA_DIR = resolve(REPO_ROOT, '../shared/data/synthea-r4');

describe('validateResource: real data', () => {
  it('accepts every official HL7 R4 example except the known bad ones', () => {
    const failures: Record<string, string[]> = {};
    let count = 0;
    let skipped = 0;
    let ms = 0;
    for (const file of readdirSync(EXAMPLES_DIR).sort()) {
      if (!file.endsWith('.json') || file === 'package.json' || file.startsWith('.')) continue;
      const resource = JSON.parse(readFileSync(join(EXAMPLES_DIR, file), 'utf8')) as {
        resourceType?: unknown;
      };
      if (typeof resource.resourceType !== 'string' || !isResourceType(resource.resourceType)) {
        skipped++;
        continue;
      }
      count++;
      const t0 = performance.now();
      const issues = validateResource(resource);
      ms += performance.now() - t0;
      if (issues.length > 0) {
        // Questionnaire-qs1 has many issues at different item paths: compare their text only.
        failures[file] =
          file === 'Questionnaire-qs1.json' ? issues.map((i) => i.details?.text ?? '') : issues.map(short);
      }
    }
    console.log(
      `HL7 R4 examples: ${count} validated (${skipped} skipped) in ${ms.toFixed(0)} ms ` +
        `(${Math.round((count / ms) * 1000)} resources/s), ${Object.keys(failures).length} known bad`,
    );
    expect(count).toBeGreaterThan(5000);
    expect(failures).toEqual(KNOWN_BAD_EXAMPLES);
  });

  it('accepts every resource of the Synthea fixture', () => {
    const bundles = readSyntheaBundles();
    const failures = bundles.flatMap(({ bundle }) =>
      bundle.entry.flatMap((e) => validateResource(e.resource).map(short)),
    );
    expect(bundles.reduce((n, b) => n + b.bundle.entry.length, 0)).toBe(768);
    expect(failures).toEqual([]);
  });

  // The full 88-patient set lives beside the repository (../shared), not in it: only where it is present.
  it.skipIf(!existsSync(SYNTHEA_DIR))('accepts every resource of the 88 Synthea bundles, fast', () => {
    const resources: unknown[] = [];
    const files = readdirSync(SYNTHEA_DIR).filter((f) => f.endsWith('.json.gz'));
    for (const file of files) {
      const bundle = JSON.parse(gunzipSync(readFileSync(join(SYNTHEA_DIR, file))).toString('utf8')) as {
        entry: { resource: unknown }[];
      };
      for (const e of bundle.entry) resources.push(e.resource);
    }
    expect(files).toHaveLength(88);
    const failures: string[] = [];
    let best = Infinity;
    for (let round = 0; round < 3; round++) {
      const t0 = performance.now();
      for (const r of resources) {
        const issues = validateResource(r);
        if (round === 0 && issues.length > 0) failures.push(...issues.map(short));
      }
      best = Math.min(best, performance.now() - t0);
    }
    console.log(
      `Synthea: ${resources.length} resources validated in ${best.toFixed(0)} ms (best of 3) = ` +
        `${Math.round((resources.length / best) * 1000)} resources/s`,
    );
    expect(resources.length).toBe(25086);
    expect(failures).toEqual([]);
  });
});
