// The generated compartment table is what the published CompartmentDefinitions say (regenerate with
// `npx tsx scripts/gen-compartments.ts` after a package update).
import { describe, expect, it } from 'vitest';
import { compartmentData } from '../../../scripts/gen-compartments.js';
import { compartmentParams, isCompartment } from './compartments.js';
import { COMPARTMENTS } from './compartments.generated.js';

describe('R4 compartments', () => {
  it('match the published CompartmentDefinitions', () => {
    expect(COMPARTMENTS).toEqual(compartmentData());
  });

  it('answer the parameters of a type in a compartment', () => {
    expect(compartmentParams('Patient', 'Observation')).toEqual(['subject', 'performer']);
    expect(compartmentParams('Encounter', 'Observation')).toEqual(['encounter']);
    expect(compartmentParams('Device', 'Patient')).toEqual([]);
    expect(isCompartment('Practitioner')).toBe(true);
    expect(isCompartment('Observation')).toBe(false);
    expect(isCompartment('toString')).toBe(false);
  });
});
