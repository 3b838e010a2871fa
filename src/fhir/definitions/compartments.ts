// The R4 compartments (https://hl7.org/fhir/R4/compartmentdefinition.html): Patient, Encounter, RelatedPerson,
// Practitioner and Device, from the published CompartmentDefinitions (compartments.generated.ts, written by
// scripts/gen-compartments.ts). A resource is in `<Compartment>/<id>` when one of the listed search parameters of its
// type references that resource.
import { COMPARTMENTS } from './compartments.generated.js';

/** Whether `type` names one of the R4 compartments. */
export function isCompartment(type: string): boolean {
  return Object.hasOwn(COMPARTMENTS, type);
}

/** The search parameters that put resources of `type` in a `compartment`; empty when the type is not in it. */
export function compartmentParams(compartment: string, type: string): readonly string[] {
  return (
    (isCompartment(compartment) && Object.hasOwn(COMPARTMENTS[compartment] as object, type)
      ? (COMPARTMENTS[compartment] as Record<string, readonly string[]>)[type]
      : undefined) ?? []
  );
}
