// Unit tests of the profile validator's bindings (a fake Terminology), resolution and cache per project and stored
// version, reference targets, and the bounds on hostile constraints and resources.
import { describe, expect, it } from 'vitest';
import type { Resource } from '../../types.js';
import type { Terminology, ValidateCodeResult } from '../model.js';
import { createProfileValidator } from './index.js';
import {
  errors,
  el,
  noTerminology,
  P,
  resolverOf,
  run,
  sd,
  type Json,
} from '../../../../test/support/profiles.js';

describe('bindings', () => {
  const profile = sd('b', 'Patient', [
    el('Patient.gender', { binding: { strength: 'required', valueSet: 'urn:vs:gender' } }),
    el('Patient.maritalStatus', { binding: { strength: 'extensible', valueSet: 'urn:vs:marital' } }),
    el('Patient.language', { binding: { strength: 'preferred', valueSet: 'urn:vs:lang' } }),
    el('Patient.communication'),
    el('Patient.communication.language', { binding: { strength: 'required', valueSet: 'urn:vs:unknown' } }),
  ]);
  const asked: string[] = [];
  const fake: Terminology = {
    ...noTerminology,
    async validateCode(_at, vs, coding): Promise<ValidateCodeResult | undefined> {
      asked.push(typeof vs === 'string' ? vs : String(vs.url));
      if (vs === 'urn:vs:unknown') return undefined;
      return { result: coding.code === 'ok' };
    },
  };

  it('a required CodeableConcept with only text: an error when the value set is known, else a warning', async () => {
    const known: Terminology = { ...fake, expand: async () => ({ total: 1, contains: [] }) };
    const r = {
      resourceType: 'Patient',
      maritalStatus: { text: 'x' },
      communication: [{ language: { text: 'fr' } }],
    };
    const p = sd('t', 'Patient', [
      el('Patient.maritalStatus', { binding: { strength: 'required', valueSet: 'urn:vs:marital' } }),
      el('Patient.communication'),
      el('Patient.communication.language', { binding: { strength: 'required', valueSet: 'urn:vs:unknown' } }),
    ]);
    expect((await run([p], r, 't', known)).map((i) => `${i.severity} ${i.expression?.[0] ?? ''}`)).toEqual([
      'error Patient.maritalStatus',
      'error Patient.communication[0].language',
    ]);
    expect((await run([p], r, 't', fake)).map((i) => `${i.severity} ${i.code}`)).toEqual([
      'warning not-supported',
      'warning not-supported',
    ]);
  });

  it('required → error, extensible → warning, preferred not checked, unknown value set → warning naming it', async () => {
    const r = {
      resourceType: 'Patient',
      gender: 'bad',
      maritalStatus: { coding: [{ system: 'urn:m', code: 'bad' }] },
      language: 'xx',
      communication: [{ language: { coding: [{ system: 'urn:l', code: 'x' }] } }],
    };
    const issues = await run([profile], r, 'b', fake);
    expect(issues.map((i) => `${i.severity} ${i.code} ${i.expression?.[0] ?? ''}`)).toEqual([
      'error value Patient.gender',
      'warning value Patient.maritalStatus',
      'warning not-supported Patient.communication[0].language',
    ]);
    expect(issues[2]?.details?.text).toContain('urn:vs:unknown');
    expect(asked).not.toContain('urn:vs:lang');
    const ok = await run(
      [profile],
      { resourceType: 'Patient', gender: 'ok', maritalStatus: { coding: [{ code: 'ok' }] } },
      'b',
      fake,
    );
    expect(ok).toEqual([]);
  });
});

describe('resolution and cache', () => {
  const needsName = (versionId: string, min: number): Resource => ({
    ...sd('x', 'Patient', [el('Patient.name', { min })]),
    id: 'x',
    meta: { versionId, lastUpdated: `2026-01-0${versionId}T00:00:00Z` },
  });

  it("serves each project its own profile, and a project's updated profile at once", async () => {
    const projects: Record<string, Resource[]> = { a: [needsName('1', 1)], b: [] };
    const v = createProfileValidator({ resolver: resolverOf(projects), terminology: noTerminology });
    const r = { resourceType: 'Patient' } as Resource;
    const asked = [{ canonical: `${P}x`, explicit: false }];
    expect(errors(await v.validate({ projectId: 'a' }, r, asked))).toEqual(['required Patient.name']);
    expect(await v.validate({ projectId: 'b' }, r, asked)).toEqual([
      expect.objectContaining({
        severity: 'warning',
        code: 'not-found',
        expression: ['Patient.meta.profile'],
      }),
    ]);
    projects.a = [needsName('2', 0)];
    expect(errors(await v.validate({ projectId: 'a' }, r, asked))).toEqual([]);
    // The same stored version is not compiled again: a change without a new version is not seen.
    (projects.a[0]!.snapshot as { element: Json[] }).element[1]!.min = 1;
    expect(errors(await v.validate({ projectId: 'a' }, r, asked))).toEqual([]);
  });

  it('refuses a profile of another type, one without a snapshot, and an explicit unknown one', async () => {
    const v = createProfileValidator({
      resolver: resolverOf({
        shared: [
          sd('obs', 'Observation', []),
          { resourceType: 'StructureDefinition', url: `${P}empty`, type: 'Patient' },
        ],
      }),
      terminology: noTerminology,
    });
    const issues = await v.validate({ projectId: null }, { resourceType: 'Patient' }, [
      { canonical: `${P}obs`, explicit: false },
      { canonical: `${P}empty`, explicit: false },
      { canonical: `${P}none`, explicit: true },
      { canonical: 'http://hl7.org/fhir/StructureDefinition/Patient', explicit: true },
    ]);
    expect(issues.map((i) => `${i.severity} ${i.code}`)).toEqual([
      'error invalid',
      'warning not-supported',
      'error not-found',
    ]);
  });
});

describe('reference targets', () => {
  const profile = sd('ref', 'Observation', [
    el('Observation.subject', {
      type: [
        { code: 'Reference', targetProfile: ['http://hl7.org/fhir/StructureDefinition/Patient', `${P}grp`] },
      ],
    }),
  ]);
  const grp = sd('grp', 'Group', []);

  it("accepts the target profiles' types, refuses others, skips what it cannot tell", async () => {
    const of = (reference: string): Json => ({ resourceType: 'Observation', subject: { reference } });
    expect(errors(await run([profile, grp], of('Patient/1'), 'ref'))).toEqual([]);
    expect(errors(await run([profile, grp], of('http://x.org/fhir/Group/2/_history/1'), 'ref'))).toEqual([]);
    expect(errors(await run([profile, grp], of('urn:uuid:0d3c'), 'ref'))).toEqual([]);
    expect(errors(await run([profile, grp], of('Device/3'), 'ref'))).toEqual([
      'structure Observation.subject.reference',
    ]);
    expect(errors(await run([profile], of('Device/3'), 'ref'))).toEqual([]); // grp unknown: not judged
  });
});

describe('hostile constraints', () => {
  it('does not evaluate quadratic traversals, and reports them', async () => {
    const p = sd('hq', 'Patient', [], {
      constraint: [
        {
          key: 'q-1',
          severity: 'error',
          human: '',
          expression: 'descendants().where(%resource.descendants().exists()).exists()',
        },
        { key: 'q-2', severity: 'error', human: '', expression: 'descendants().descendants().exists()' },
        { key: 'q-3', severity: 'error', human: '', expression: `${'name.exists() and '.repeat(200)}true` },
      ],
    });
    const issues = await run([p], { resourceType: 'Patient', name: [{ family: 'x' }] }, 'hq');
    expect(issues.map((i) => `${i.severity} ${i.code}`)).toEqual([
      'warning processing',
      'warning processing',
      'warning processing',
    ]);
  });
});

describe('bounded work', () => {
  it('resolves a bounded number of canonicals for a resource naming thousands of extensions', async () => {
    const resolver = resolverOf({ shared: [sd('plain', 'Patient', [])] });
    const v = createProfileValidator({ resolver, terminology: noTerminology });
    const extension = Array.from({ length: 2000 }, (_, i) => ({ url: `urn:ext:${i}`, valueString: 'x' }));
    const issues = await v.validate({ projectId: null }, { resourceType: 'Patient', extension } as Resource, [
      { canonical: `${P}plain`, explicit: false },
    ]);
    expect(issues).toEqual([]);
    expect(resolver.calls).toBeLessThanOrEqual(70);
  });
});

describe('findings of the HL7 R4 examples against the R4 definitions', () => {
  it('a base-URL profile that is not a type (…/vitalsigns) names its type through its definition', async () => {
    const vitals = {
      ...sd('v', 'Observation', []),
      url: 'http://hl7.org/fhir/StructureDefinition/vitalsigns',
    };
    const p = sd('panel', 'Observation', [
      el('Observation.hasMember', {
        type: [{ code: 'Reference', targetProfile: ['http://hl7.org/fhir/StructureDefinition/vitalsigns'] }],
      }),
    ]);
    const r = { resourceType: 'Observation', hasMember: [{ reference: 'Observation/bp' }] };
    expect(errors(await run([p, vitals], r, 'panel'))).toEqual([]);
  });

  it('ext-1 counts a value present only by its extensions (_valueString)', async () => {
    const p = sd('e1', 'Patient', [
      el('Patient.extension', {
        constraint: [
          { key: 'ext-1', severity: 'error', human: 'x', expression: 'extension.exists() != value.exists()' },
        ],
      }),
    ]);
    const r = {
      resourceType: 'Patient',
      extension: [{ url: 'urn:c', _valueString: { extension: [{ url: 'urn:t', valueCode: 'nl' }] } }],
    };
    expect(errors(await run([p], r, 'e1'))).toEqual([]);
    const both = {
      resourceType: 'Patient',
      extension: [{ url: 'urn:c', valueString: 'a', extension: [{ url: 'urn:t', valueCode: 'nl' }] }],
    };
    expect(errors(await run([p], both, 'e1'))).toEqual(['invariant Patient.extension[0]']);
  });
});
