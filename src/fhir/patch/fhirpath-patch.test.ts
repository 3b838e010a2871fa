// FHIRPath Patch, the pure function: cases after HL7's fhir-patch-tests.xml written as JSON, and the errors.
import { describe, expect, it } from 'vitest';
import { parseJson } from '../json/parse.js';
import { stringifyJson } from '../json/stringify.js';
import { FhirError } from '../outcome.js';
import { applyFhirpathPatch, MAX_OPERATIONS, quoteOperatorNames } from './fhirpath-patch.js';

type Json = Record<string, unknown>;
const op = (type: string, path: string, more: Json[] = []): Json => ({
  name: 'operation',
  part: [{ name: 'type', valueCode: type }, { name: 'path', valueString: path }, ...more],
});
const patch = (...ops: Json[]): Json => ({ resourceType: 'Parameters', parameter: ops });
const apply = (resource: Json, ...ops: Json[]): Json =>
  applyFhirpathPatch(structuredClone(resource), patch(...ops));
const failure = (resource: Json, ...ops: Json[]): FhirError => {
  try {
    apply(resource, ...ops);
  } catch (err) {
    expect(err).toBeInstanceOf(FhirError);
    return err as FhirError;
  }
  throw new Error('the patch applied');
};
const ids = (...values: string[]): Json[] => values.map((value) => ({ system: 'http://example.org', value }));
const listPatient = { resourceType: 'Patient', identifier: ids('1', '2', '3', '4') };

describe('FHIRPath Patch operations', () => {
  it('replaces, deletes and adds a primitive', () => {
    const p = { resourceType: 'Patient', birthDate: '1920-01-01' };
    expect(apply(p)).toEqual(p);
    const repl = apply(p, op('replace', 'Patient.birthDate', [{ name: 'value', valueDate: '1930-01-01' }]));
    expect(repl).toEqual({ resourceType: 'Patient', birthDate: '1930-01-01' });
    expect(apply(p, op('delete', 'Patient.birthDate'))).toEqual({ resourceType: 'Patient' });
    const added = apply(
      { resourceType: 'Patient' },
      op('add', 'Patient', [
        { name: 'name', valueString: 'birthDate' },
        { name: 'value', valueDate: '1930-01-01' },
      ]),
    );
    expect(added).toEqual(repl);
  });

  it('works on nested primitives and removes what a delete leaves empty', () => {
    const p = { resourceType: 'Patient', contact: [{ name: { text: 'a name' }, gender: 'male' }] };
    expect(
      apply(p, op('replace', 'Patient.contact[0].gender', [{ name: 'value', valueCode: 'female' }])),
    ).toEqual({ resourceType: 'Patient', contact: [{ name: { text: 'a name' }, gender: 'female' }] });
    expect(apply(p, op('delete', 'Patient.contact[0].name.text'))).toEqual({
      resourceType: 'Patient',
      contact: [{ gender: 'male' }],
    });
    const added = apply(
      { resourceType: 'Patient', contact: [{ name: { text: 'a name' } }] },
      op('add', 'Patient.contact[0]', [
        { name: 'name', valueString: 'gender' },
        { name: 'value', valueCode: 'male' },
      ]),
    );
    expect(added).toEqual(p);
  });

  it('adds, replaces and deletes complex and anonymous types', () => {
    const married = apply(
      { resourceType: 'Patient' },
      op('add', 'Patient', [
        { name: 'name', valueString: 'maritalStatus' },
        { name: 'value', valueCodeableConcept: { text: 'married' } },
      ]),
    );
    expect(married).toEqual({ resourceType: 'Patient', maritalStatus: { text: 'married' } });
    expect(
      apply(
        married,
        op('replace', 'Patient.maritalStatus', [
          { name: 'value', valueCodeableConcept: { id: '2', text: 'not' } },
        ]),
      ),
    ).toEqual({ resourceType: 'Patient', maritalStatus: { id: '2', text: 'not' } });
    const contact = apply(
      { resourceType: 'Patient' },
      op('add', 'Patient', [
        { name: 'name', valueString: 'contact' },
        {
          name: 'value',
          part: [
            { name: 'name', valueHumanName: { text: 'a name' } },
            { name: 'telecom', valueContactPoint: { system: 'phone', value: '1' } },
            { name: 'telecom', valueContactPoint: { system: 'phone', value: '2' } },
          ],
        },
      ]),
    );
    expect(contact).toEqual({
      resourceType: 'Patient',
      contact: [
        {
          name: { text: 'a name' },
          telecom: [
            { system: 'phone', value: '1' },
            { system: 'phone', value: '2' },
          ],
        },
      ],
    });
    expect(apply(contact, op('delete', 'Patient.contact[0]'))).toEqual({ resourceType: 'Patient' });
  });

  it('adds to, inserts in, deletes from and reorders lists', () => {
    const added = apply(
      { resourceType: 'Patient', identifier: ids('1', '2') },
      op('add', 'Patient', [
        { name: 'name', valueString: 'identifier' },
        { name: 'value', valueIdentifier: ids('3')[0] },
      ]),
    );
    expect(added.identifier).toEqual(ids('1', '2', '3'));
    const inserted = apply(
      { resourceType: 'Patient', identifier: ids('1', '3') },
      op('insert', 'Patient.identifier', [
        { name: 'value', valueIdentifier: ids('2')[0] },
        { name: 'index', valueInteger: 1 },
      ]),
    );
    expect(inserted.identifier).toEqual(ids('1', '2', '3'));
    expect(apply(listPatient, op('delete', 'Patient.identifier[1]')).identifier).toEqual(ids('1', '3', '4'));
    const move = (source: number, destination: number): unknown =>
      apply(
        listPatient,
        op('move', 'Patient.identifier', [
          { name: 'source', valueInteger: source },
          { name: 'destination', valueInteger: destination },
        ]),
      ).identifier;
    expect(move(3, 1)).toEqual(ids('1', '4', '2', '3'));
    expect(move(0, 3)).toEqual(ids('2', '3', '4', '1'));
    expect(move(1, 1)).toEqual(ids('1', '2', '3', '4'));
  });

  it('keeps primitive companions (id, extension) in step with their values', () => {
    const p = {
      resourceType: 'Patient',
      name: [{ given: ['a', 'b', 'c'], _given: [null, { id: 'b' }, null] }],
    };
    const moved = apply(
      p,
      op('move', 'Patient.name[0].given', [
        { name: 'source', valueInteger: 1 },
        { name: 'destination', valueInteger: 0 },
      ]),
    );
    expect(moved.name).toEqual([{ given: ['b', 'a', 'c'], _given: [{ id: 'b' }, null, null] }]);
    expect(apply(p, op('delete', 'Patient.name[0].given[1]')).name).toEqual([{ given: ['a', 'c'] }]);
    const ext = { url: 'http://example.org/x', valueString: 'y' };
    const withExt = apply(
      { resourceType: 'Patient', birthDate: '2000-01-01' },
      op('add', 'Patient.birthDate', [
        { name: 'name', valueString: 'extension' },
        { name: 'value', valueExtension: ext },
      ]),
    );
    expect(withExt).toEqual({
      resourceType: 'Patient',
      birthDate: '2000-01-01',
      _birthDate: { extension: [ext] },
    });
    expect(apply(withExt, op('delete', 'Patient.birthDate.extension'))).toEqual({
      resourceType: 'Patient',
      birthDate: '2000-01-01',
    });
  });

  it('changes the type of a choice element and keeps decimal texts', () => {
    const obs = { resourceType: 'Observation', status: 'final', code: { text: 'x' }, valueString: 'a' };
    const text = stringifyJson(
      applyFhirpathPatch(
        structuredClone(obs),
        parseJson(
          JSON.stringify(
            patch(op('replace', 'Observation.value', [{ name: 'value', valueQuantity: { value: 0 } }])),
          ).replace('"value":0', '"value":1.50'),
        ),
      ),
    );
    expect(text).toContain('"valueQuantity":{"value":1.50}');
    expect(text).not.toContain('valueString');
    const added = apply(
      { resourceType: 'Observation', status: 'final', code: { text: 'x' } },
      op('add', 'Observation', [
        { name: 'name', valueString: 'value' },
        { name: 'value', valueBoolean: true },
      ]),
    );
    expect(added.valueBoolean).toBe(true);
  });

  it('reads `div` after a dot as the Narrative element, not the operator', () => {
    expect(quoteOperatorNames("Patient.text.div.where($this = 'a.div') | 1 div 2")).toBe(
      "Patient.text.`div`.where($this = 'a.div') | 1 div 2",
    );
    const div = '<div xmlns="http://www.w3.org/1999/xhtml">new</div>';
    const out = apply(
      {
        resourceType: 'Patient',
        text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">old</div>' },
      },
      op('replace', 'Patient.text.div', [{ name: 'value', valueString: div }]),
    );
    expect(out.text).toEqual({ status: 'generated', div });
  });

  it('reaches contained resources and %resource, and only elements of the resource', () => {
    const r = {
      resourceType: 'Patient',
      name: [{ family: 'A' }],
      generalPractitioner: [{ reference: 'Practitioner/1' }],
      contained: [
        { resourceType: 'Observation', id: 'o', status: 'final', code: { text: 'x' }, valueString: 's' },
      ],
    };
    const obs = (out: Json): unknown => (out.contained as Json[])[0];
    expect(
      obs(apply(r, op('replace', 'Patient.contained[0].value', [{ name: 'value', valueBoolean: true }]))),
    ).toEqual({
      resourceType: 'Observation',
      id: 'o',
      status: 'final',
      code: { text: 'x' },
      valueBoolean: true,
    });
    const amended = apply(
      r,
      op('replace', 'Patient.contained.ofType(Observation).status', [
        { name: 'value', valueCode: 'amended' },
      ]),
    );
    expect(obs(amended)).toMatchObject({ status: 'amended' });
    expect(apply(r, op('delete', '%resource.name')).name).toBeUndefined();
    const added = apply(
      r,
      op('add', 'Patient', [
        { name: 'name', valueString: 'contained' },
        { name: 'value', resource: { resourceType: 'Practitioner', id: 'p' } },
      ]),
    );
    expect((added.contained as Json[])[1]).toEqual({ resourceType: 'Practitioner', id: 'p' });
    // resolve() yields a stand-in for the referenced resource, which is not part of this one.
    expect(failure(r, op('delete', 'Patient.generalPractitioner.resolve()')).code).toBe(
      'fhirpatch.not-element',
    );
  });

  it('applies operations in order, each on the result of the ones before', () => {
    const out = apply(
      { resourceType: 'Patient', contact: [{ name: { family: 'du Marché' } }] },
      op('add', 'Patient.contact[0]', [
        { name: 'name', valueString: 'gender' },
        { name: 'value', valueCode: 'male' },
      ]),
      op('add', 'Patient', [
        { name: 'name', valueString: 'contact' },
        { name: 'value', part: [{ name: 'gender', valueCode: 'male' }] },
      ]),
      op('replace', 'Patient.contact.where(name.exists().not()).gender', [
        { name: 'value', valueCode: 'female' },
      ]),
    );
    expect(out.contact).toEqual([{ name: { family: 'du Marché' }, gender: 'male' }, { gender: 'female' }]);
  });
});

describe('FHIRPath Patch errors', () => {
  const p = {
    resourceType: 'Patient',
    identifier: [{ use: 'official', value: '123' }],
    name: [{ given: ['a', 'b'] }],
  };
  const expectError = (err: FhirError, status: number, code: string): void => {
    expect(err.status).toBe(status);
    expect(err.code).toBe(code);
  };

  it('refuses paths that match nothing (except delete), several, or no element', () => {
    const missing = failure(
      p,
      op('add', "Patient.identifier.where(use = 'official').period", [
        { name: 'name', valueString: 'end' },
        { name: 'value', valueDateTime: '2021-12-01' },
      ]),
    );
    expectError(missing, 422, 'fhirpatch.no-match');
    expect(missing.message).toContain(
      "No content found at Patient.identifier.where(use = 'official').period when adding",
    );
    expect(apply(p, op('delete', 'Patient.birthDate'))).toEqual(p);
    expectError(failure(p, op('delete', 'Patient.name.given')), 422, 'fhirpatch.several');
    expectError(
      failure(p, op('replace', 'Patient.name.given', [{ name: 'value', valueString: 'x' }])),
      422,
      'fhirpatch.several',
    );
    expectError(failure(p, op('delete', "'constant'")), 422, 'fhirpatch.not-element');
    expectError(failure(p, op('delete', 'Patient')), 422, 'fhirpatch.root');
    expectError(
      failure(
        p,
        op('insert', 'Patient.identifier.value', [
          { name: 'value', valueString: 'x' },
          { name: 'index', valueInteger: 0 },
        ]),
      ),
      422,
      'fhirpatch.not-list',
    );
  });

  it('refuses malformed Parameters and invalid FHIRPath with 400', () => {
    expectError(failure(p, { name: 'other' }), 400, 'fhirpatch.parameter-name');
    expectError(failure(p, op('upsert', 'Patient')), 400, 'fhirpatch.op-type');
    expectError(failure(p, op('add', 'Patient')), 400, 'fhirpatch.missing-part');
    expectError(failure(p, op('delete', 'Patient.name[')), 400, 'fhirpatch.path-invalid');
    expectError(failure(p, op('delete', 'Patient.name.nosuchfunction()')), 400, 'fhirpatch.path-invalid');
    expectError(failure(p, op('delete', 'x'.repeat(3000))), 400, 'fhirpatch.path-length');
    expectError(
      failure(
        p,
        op('move', 'Patient.identifier', [
          { name: 'source', valueInteger: -1 },
          { name: 'destination', valueInteger: 0 },
        ]),
      ),
      400,
      'fhirpatch.integer',
    );
    const many = Array.from({ length: MAX_OPERATIONS + 1 }, () => op('delete', 'Patient.birthDate'));
    expectError(failure(p, ...many), 413, 'fhirpatch.too-many');
  });

  it('refuses indexes out of range, unknown elements, wrong types and adding a present element', () => {
    const move = (source: number, destination: number): Json =>
      op('move', 'Patient.identifier', [
        { name: 'source', valueInteger: source },
        { name: 'destination', valueInteger: destination },
      ]);
    expectError(failure(p, move(0, 1)), 422, 'fhirpatch.index');
    expectError(
      failure(
        p,
        op('insert', 'Patient.identifier', [
          { name: 'value', valueIdentifier: {} },
          { name: 'index', valueInteger: 2 },
        ]),
      ),
      422,
      'fhirpatch.index',
    );
    const add = (name: string, value: Json): Json =>
      op('add', 'Patient', [
        { name: 'name', valueString: name },
        { name: 'value', ...value },
      ]);
    expectError(failure(p, add('nickname', { valueString: 'x' })), 422, 'fhirpatch.unknown-element');
    expectError(failure(p, add('maritalStatus', { valueCoding: { code: 'M' } })), 422, 'fhirpatch.type');
    expectError(
      failure({ ...p, gender: 'male' }, add('gender', { valueCode: 'female' })),
      422,
      'fhirpatch.exists',
    );
    expectError(failure(p, add('multipleBirth', { valueString: 'x' })), 422, 'fhirpatch.choice-type');
  });
});
