// fields.ts and table.ts: splitting `_fields`, search parameter names → their expression for the type, FHIRPath
// with types from the engine, invalid entries, and a table's header and rows.
import { describe, expect, it } from 'vitest';
import { FhirError } from '../outcome.js';
import { compileField, splitFields } from './fields.js';
import { assertCsvType, csvTable, fieldsParam, isCsvType } from './table.js';

const patient = {
  resourceType: 'Patient',
  id: 'p1',
  gender: 'female',
  birthDate: '1970-01-01',
  multipleBirthInteger: 2,
  name: [
    { given: ['Ann', 'Marie'], family: 'Lee', prefix: ['Dr.'] },
    { given: ['Nan'], family: 'Second' },
  ],
  telecom: [
    { system: 'email', value: 'a@example.org' },
    { system: 'phone', value: '555' },
  ],
  generalPractitioner: [{ reference: 'Practitioner/1', display: 'Dr. Who' }],
};

const first = (type: string, entry: string, resource: Record<string, unknown> = patient) =>
  compileField(type, entry).evaluate(resource);

const errorOf = (fn: () => unknown): FhirError => {
  try {
    fn();
  } catch (err) {
    return err as FhirError;
  }
  throw new Error('no error');
};

describe('splitFields', () => {
  it('splits on commas outside parentheses and quotes, trimming entries', () => {
    expect(splitFields(' id , name.given.substring(0, 3),gender ')).toEqual([
      'id',
      'name.given.substring(0, 3)',
      'gender',
    ]);
    expect(splitFields("'a,b', iif(active, 'x,y', \"z,w\"), `we,ird`")).toEqual([
      "'a,b'",
      'iif(active, \'x,y\', "z,w")',
      '`we,ird`',
    ]);
    expect(splitFields("'it\\'s, here',x")).toEqual(["'it\\'s, here'", 'x']);
    expect(splitFields('a,,b')).toEqual(['a', '', 'b']);
  });
});

describe('compileField', () => {
  it('a search parameter name is its expression for this type only', () => {
    expect(compileField('Patient', 'name').expression).toBe('Patient.name');
    expect(compileField('Practitioner', 'name').expression).toBe('Practitioner.name');
    expect(compileField('Patient', 'phone').expression).toBe("Patient.telecom.where(system='phone')");
    expect(compileField('ActivityDefinition', 'context').expression).toBe(
      '(ActivityDefinition.useContext.value as CodeableConcept)',
    );
    expect(first('Patient', 'phone')).toMatchObject({ type: 'ContactPoint', value: { value: '555' } });
    expect(first('Patient', 'general-practitioner')).toMatchObject({ type: 'Reference' });
    expect(first('Patient', '_id')).toMatchObject({ value: 'p1' });
    expect(first('Patient', 'deceased')).toMatchObject({ type: 'boolean', value: false });
    const ad = {
      resourceType: 'ActivityDefinition',
      useContext: [
        { code: { code: 'age' }, valueQuantity: { value: 1 } },
        { code: { code: 'focus' }, valueCodeableConcept: { text: 'Focus' } },
      ],
    };
    expect(first('ActivityDefinition', 'context', ad)).toMatchObject({
      type: 'CodeableConcept',
      value: { text: 'Focus' },
    });
  });

  it('other entries are FHIRPath with typed results: only the first value', () => {
    expect(first('Patient', 'name')).toMatchObject({ type: 'HumanName', value: { family: 'Lee' } });
    expect(first('Patient', 'Patient.name[1]')).toMatchObject({ value: { family: 'Second' } });
    expect(first('Patient', 'name.given')).toMatchObject({ value: 'Ann' });
    expect(first('Patient', 'birthDate')).toMatchObject({ type: 'date', value: '1970-01-01' });
    expect(first('Patient', 'multipleBirth')).toMatchObject({ value: 2 });
    expect(first('Patient', "name.where(family = 'Second').given.first()")).toMatchObject({
      value: 'Nan',
    });
    expect(first('Patient', 'name.given.count()')).toMatchObject({ value: 3 });
    expect(first('Patient', "'=1+1'")).toEqual({ type: 'string', value: '=1+1' });
    expect(first('Patient', 'telecom.last()')).toMatchObject({ type: 'ContactPoint' });
    expect(first('Patient', 'address')).toBeUndefined();
    expect(first('Patient', 'Practitioner.name')).toBeUndefined();
  });

  it('service types: typed from their StructureDefinitions', () => {
    const pm = {
      resourceType: 'ProjectMembership',
      user: { reference: 'User/1', display: 'Ann' },
      admin: true,
    };
    expect(first('ProjectMembership', 'user', pm)).toMatchObject({ type: 'Reference' });
    expect(first('ProjectMembership', 'admin', pm)).toMatchObject({ type: 'boolean', value: true });
    // fhirpath does not know the type here: the value's shape decides when formatted.
    expect(first('ProjectMembership', "user.where(display = 'Ann')", pm)).toMatchObject({
      value: { display: 'Ann' },
    });
  });

  it('knows the top-level elements a fast path entry reads (storage sends only those)', () => {
    expect(compileField('Patient', 'name').keys).toEqual(['name']);
    expect(compileField('Patient', 'phone').keys).toEqual(['telecom']);
    expect(compileField('Patient', 'Patient.name[0].given').keys).toEqual(['name']);
    expect(compileField('Patient', 'multipleBirth').keys).toEqual([
      'multipleBirthBoolean',
      'multipleBirthInteger',
    ]);
    expect(compileField('Observation', 'value-quantity').keys).toContain('valueQuantity');
    for (const entry of ['name.given.first()', "'x'", 'Patient', 'deceased'])
      expect(compileField('Patient', entry).keys).toBeUndefined();
    const omit = csvTable('Patient', 'name,gender,phone').omit;
    expect(omit).toEqual(
      expect.arrayContaining(['resourceType', 'meta', 'address', '_birthDate', 'deceasedBoolean']),
    );
    for (const k of ['id', 'name', 'gender', 'telecom']) expect(omit).not.toContain(k);
    expect(csvTable('Patient', 'name,name.count()').omit).toBeUndefined();
  });

  it('an entry that does not parse, or calls an unknown function, is a 400', () => {
    for (const entry of ['name.', 'name given', 'substring(', '', 'name.nope()', '%undefinedVariable']) {
      const err = errorOf(() => compileField('Patient', entry));
      expect(err).toBeInstanceOf(FhirError);
      expect(err.status).toBe(400);
      expect(err.issueCode).toBe('invalid');
      expect(err.message.startsWith('Invalid FHIRPath expression')).toBe(true);
    }
  });

  it('a FHIRPath failing on one resource throws when evaluated (the table leaves that cell empty)', () => {
    const f = compileField('Patient', 'name.given.substring(0, 3)');
    expect(() => f.evaluate(patient)).toThrow();
    expect(f.evaluate({ resourceType: 'Patient', name: [{ given: ['Alexander'] }] })).toMatchObject({
      value: 'Ale',
    });
  });
});

describe('csvTable', () => {
  it('BOM and header of trimmed, escaped entries; one row per resource; failures counted', () => {
    const t = csvTable('Patient', " id , -1 ,'=1+1', name, name.given.substring(0, 3), 'a,b' ");
    expect(t.head).toBe("\uFEFFid,'-1,'=1+1',name,\"name.given.substring(0, 3)\",\"'a,b'\"\r\n");
    expect(t.row(JSON.stringify(patient))).toBe('p1,\'-1,\'=1+1,Dr. Ann Marie Lee,,"a,b"\r\n');
    expect(t.row(JSON.stringify({ ...patient, id: 'p2', name: [{ given: ['Bob'] }] }))).toBe(
      'p2,\'-1,\'=1+1,Bob,Bob,"a,b"\r\n',
    );
    expect(t.failures()).toEqual({
      count: 1,
      first: { entry: 'name.given.substring(0, 3)', resource: 'Patient/p1', message: expect.any(String) },
    });
  });

  it('supported types and the _fields parameter', () => {
    expect(isCsvType('Patient')).toBe(true);
    for (const t of ['Project', 'ProjectMembership', 'AsyncJob']) expect(isCsvType(t)).toBe(true);
    for (const t of ['User', 'ClientApplication', 'Login', 'Nope', 'patient', 'Resource'])
      expect(isCsvType(t)).toBe(false);
    expect(errorOf(() => assertCsvType('User')).message).toBe('Unsupported resource type');
    expect(fieldsParam(['id', 'name'])).toBe('id,name');
    for (const v of [undefined, '', '  ', ['', ' ']])
      expect(errorOf(() => fieldsParam(v)).message).toBe('Missing _fields parameter');
  });
});
