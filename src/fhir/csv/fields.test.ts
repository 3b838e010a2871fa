// fields.ts and table.ts: splitting `_fields`, search parameter names → their expression for the type, FHIRPath
// with types from the engine, invalid entries, and a table's header and rows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FhirError } from '../outcome.js';
import { evaluateRows, type SlowColumn } from './fhirpath-eval.js';
import { createFhirpathPool, type FhirpathPool } from './fhirpath-pool.js';
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

/** The first value of an entry: fast path entries in-process, the others as the FHIRPath worker runs them. */
const first = (type: string, entry: string, resource: Record<string, unknown> = patient) => {
  const f = compileField(type, entry);
  if (f.evaluate) return f.evaluate(resource);
  const cell = evaluateRows(type, [f.slow as SlowColumn], [JSON.stringify(resource)])[0]?.[0];
  if (cell && 'error' in cell) throw new Error(cell.error);
  return cell;
};

let pool: FhirpathPool;
beforeAll(() => {
  pool = createFhirpathPool({ timeoutMs: 30_000, size: 1 });
});
afterAll(() => pool.close());

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

  it('knows the top-level elements a fast path entry reads (storage sends only those)', async () => {
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
    const omit = (await csvTable('Patient', 'name,gender,phone', pool)).omit;
    expect(omit).toEqual(
      expect.arrayContaining(['resourceType', 'meta', 'address', '_birthDate', 'deceasedBoolean']),
    );
    for (const k of ['id', 'name', 'gender', 'telecom']) expect(omit).not.toContain(k);
    expect((await csvTable('Patient', 'name,name.count()', pool)).omit).toBeUndefined();
  });

  it('an entry that does not parse, or calls an unknown function, is a 400 (checked in the worker)', async () => {
    for (const entry of ['name.', 'name given', 'substring(', '', 'name.nope()', '%undefinedVariable']) {
      const err = await csvTable('Patient', `id,${entry}`, pool).then(
        () => new Error('no error'),
        (e: unknown) => e as FhirError,
      );
      expect(err).toBeInstanceOf(FhirError);
      expect((err as FhirError).status).toBe(400);
      expect((err as FhirError).issueCode).toBe('invalid');
      expect(err.message.startsWith('Invalid FHIRPath expression')).toBe(true);
    }
  });

  it('a FHIRPath failing on one resource gives an error for that cell (the table leaves it empty)', () => {
    expect(() => first('Patient', 'name.given.substring(0, 3)')).toThrow();
    expect(
      first('Patient', 'name.given.substring(0, 3)', {
        resourceType: 'Patient',
        name: [{ given: ['Alexander'] }],
      }),
    ).toMatchObject({ value: 'Ale' });
  });

  it('a FHIRPath beyond the time limit stops its worker and is a 422 too-costly naming the limit', async () => {
    const fast = createFhirpathPool({ timeoutMs: 1000, size: 1 });
    try {
      const u = `(${Array.from({ length: 20 }, (_, i) => i + 1).join('|')})`;
      const err = await csvTable(
        'Patient',
        `(1|2).select(${u}.select(${u}.select(${u}.select(${u})))).count()`,
        fast,
      ).then(
        () => new Error('no error'),
        (e: unknown) => e as FhirError,
      );
      expect((err as FhirError).status).toBe(422);
      expect((err as FhirError).issueCode).toBe('too-costly');
      expect(err.message).toMatch(/limit of 1000 ms \(fhirpathTimeout\)/);
      // The pool replaces the stopped worker: the next table works.
      const t = await csvTable('Patient', 'id,name.given.first()', fast);
      expect(await t.rows([JSON.stringify(patient)])).toBe('p1,Ann\r\n');
    } finally {
      await fast.close();
    }
  });
});

describe('csvTable', () => {
  it('BOM and header of trimmed, escaped entries; one row per resource; failures counted', async () => {
    const t = await csvTable('Patient', " id , -1 ,'=1+1', name, name.given.substring(0, 3), 'a,b' ", pool);
    expect(t.head).toBe("\uFEFFid,'-1,'=1+1',name,\"name.given.substring(0, 3)\",\"'a,b'\"\r\n");
    expect(
      await t.rows([
        JSON.stringify(patient),
        JSON.stringify({ ...patient, id: 'p2', name: [{ given: ['Bob'] }] }),
      ]),
    ).toBe('p1,\'-1,\'=1+1,Dr. Ann Marie Lee,,"a,b"\r\np2,\'-1,\'=1+1,Bob,Bob,"a,b"\r\n');
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
