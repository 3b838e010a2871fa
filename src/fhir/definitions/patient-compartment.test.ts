// The Patient compartment as the R4 CompartmentDefinition publishes it (https://hl7.org/fhir/R4/compartmentdefinition-patient.html).
import { describe, expect, it } from 'vitest';
import { inPatientCompartment, patientCompartment } from './patient-compartment.js';

describe('patientCompartment', () => {
  it('names exactly the published parameters of each type', () => {
    const c = patientCompartment();
    expect(c.get('Observation')).toEqual(['subject', 'performer']);
    expect(c.get('Patient')).toEqual(['link']);
    expect(c.get('Group')).toEqual(['member']);
    expect(c.size).toBeGreaterThan(60);
  });

  it('leaves out the types listed without parameters', () => {
    for (const t of ['Organization', 'Practitioner', 'Medication', 'Location']) {
      expect(patientCompartment().has(t)).toBe(false);
      expect(inPatientCompartment(t)).toBe(false);
    }
    expect(inPatientCompartment('Patient')).toBe(true);
  });
});
