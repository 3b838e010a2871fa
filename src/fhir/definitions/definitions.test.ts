import { describe, expect, it } from 'vitest';
import {
  definitions,
  elementTypeOfPath,
  getElement,
  isResourceType,
  MEDPLUM_RESOURCE_TYPES,
  r4ResourceTypes,
  resourceTypes,
} from './index.js';

describe('FHIR definitions', () => {
  it('loads once, reasonably fast', () => {
    const t0 = performance.now();
    const d = definitions();
    const ms = performance.now() - t0;
    console.log(`definitions loaded in ${ms.toFixed(0)} ms (${d.nodes.size} structures)`);
    expect(definitions()).toBe(d);
  });

  it('lists the supported resource types', () => {
    const all = resourceTypes();
    expect([...all]).toEqual([...all].sort());
    for (const t of ['Patient', 'Observation', 'Bundle', 'Parameters', 'Binary', ...MEDPLUM_RESOURCE_TYPES]) {
      expect(all).toContain(t);
      expect(isResourceType(t)).toBe(true);
    }
    // Abstract types, other Medplum types, R4B's SubscriptionStatus and datatypes are not resource types.
    for (const t of [
      'Resource',
      'DomainResource',
      'MetadataResource',
      'Bot',
      'AccessPolicy',
      'SubscriptionStatus',
    ]) {
      expect(isResourceType(t)).toBe(false);
    }
    expect(isResourceType('HumanName')).toBe(false);
    expect(isResourceType('patient')).toBe(false);

    const r4 = r4ResourceTypes();
    expect(r4).toHaveLength(146); // the R4 (4.0.1) resource StructureDefinitions
    expect(r4).not.toContain('Project');
    expect(all).toHaveLength(r4.length + MEDPLUM_RESOURCE_TYPES.length);
  });

  it('describes elements by path', () => {
    expect(getElement('Patient.name')).toEqual({
      path: 'Patient.name',
      name: 'name',
      min: 0,
      max: Infinity,
      types: ['HumanName'],
      isChoice: false,
      isSummary: true,
    });
    expect(getElement('Observation.status')).toMatchObject({ min: 1, max: 1, types: ['code'] });
    expect(getElement('Patient.maritalStatus')).toMatchObject({ isSummary: false });
    const value = getElement('Observation.value[x]');
    expect(value).toMatchObject({ path: 'Observation.value[x]', name: 'value', isChoice: true, max: 1 });
    expect(value?.types).toContain('Quantity');
    expect(value?.types).toContain('dateTime');
    expect(getElement('Questionnaire.item.item')).toMatchObject({
      contentReference: 'Questionnaire.item',
      types: ['BackboneElement'],
      max: Infinity,
    });
    expect(getElement('Patient.contact.name')).toMatchObject({ types: ['HumanName'], max: 1 });
    // Following into datatypes.
    expect(getElement('Patient.name.given')).toMatchObject({ path: 'HumanName.given', types: ['string'] });
    expect(getElement('Patient.id')).toMatchObject({ types: ['id'] });
    expect(getElement('Patient')).toMatchObject({ path: 'Patient', types: ['Patient'] });
    expect(getElement('HumanName.family')).toMatchObject({ types: ['string'], max: 1 });
    expect(getElement('Patient.foo')).toBeUndefined();
    expect(getElement('Nope.name')).toBeUndefined();
    expect(getElement('Nope')).toBeUndefined();
    // Medplum's Meta extras; Cinder stores meta.project as a bare id string.
    expect(getElement('Meta.author')).toMatchObject({ types: ['Reference'] });
    expect(['uri', 'string']).toContain(getElement('Meta.project')?.types[0]);
    expect(getElement('Project.setting.value[x]')?.types).toEqual([
      'string',
      'boolean',
      'decimal',
      'integer',
    ]);
  });

  it('gives the type at a path below a resource', () => {
    expect(elementTypeOfPath('Observation', ['valueQuantity'])).toEqual(['Quantity']);
    expect(elementTypeOfPath('Observation', ['valueQuantity', 'value'])).toEqual(['decimal']);
    expect(elementTypeOfPath('Observation', ['value'])).toContain('CodeableConcept');
    expect(elementTypeOfPath('Observation', ['value[x]'])).toContain('Period');
    expect(elementTypeOfPath('Observation', ['code', 'coding', 'system'])).toEqual(['uri']);
    expect(elementTypeOfPath('Observation', ['component', 'valueCodeableConcept', 'text'])).toEqual([
      'string',
    ]);
    expect(elementTypeOfPath('Observation', ['component', 'referenceRange', 'low'])).toEqual(['Quantity']);
    expect(elementTypeOfPath('Questionnaire', ['item', 'item', 'item', 'linkId'])).toEqual(['string']);
    expect(elementTypeOfPath('Questionnaire', ['item', 'item'])).toEqual(['BackboneElement']);
    expect(elementTypeOfPath('Patient', ['name', 'given'])).toEqual(['string']);
    expect(elementTypeOfPath('Patient', ['deceasedDateTime'])).toEqual(['dateTime']);
    expect(elementTypeOfPath('Patient', ['meta', 'lastUpdated'])).toEqual(['instant']);
    expect(elementTypeOfPath('Patient', ['extension', 'url'])).toEqual(['uri']);
    expect(elementTypeOfPath('Patient', [])).toEqual(['Patient']);
    expect(elementTypeOfPath('Bundle', ['entry', 'resource'])).toEqual(['Resource']);
    expect(elementTypeOfPath('ProjectMembership', ['access', 'policy'])).toEqual(['Reference']);
    expect(elementTypeOfPath('Patient', ['foo'])).toBeUndefined();
    expect(elementTypeOfPath('Observation', ['value', 'value'])).toBeUndefined(); // choice needs its type
    expect(elementTypeOfPath('Nope', ['id'])).toBeUndefined();
  });

  it('reads the primitive regexes from the type definitions', () => {
    const re = definitions().primitiveRegex;
    expect(re.get('id')).toBe('[A-Za-z0-9\\-\\.]{1,64}');
    for (const t of ['date', 'dateTime', 'instant', 'time', 'oid', 'uuid', 'code', 'uri', 'base64Binary']) {
      expect(re.has(t)).toBe(true);
    }
  });
});
