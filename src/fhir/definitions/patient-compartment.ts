// The R4 Patient compartment (https://hl7.org/fhir/R4/compartmentdefinition-patient.html) for the bulk export: per
// resource type, the search parameters whose reference to a Patient puts a resource in that Patient's compartment.
// A view of compartments.ts, so that export, compartment search and $everything read one published definition.
import { COMPARTMENTS } from './compartments.generated.js';
import { isResourceType } from './index.js';

let memo: ReadonlyMap<string, readonly string[]> | undefined;

/** Resource type → the search parameter codes of the Patient compartment (only types that have some). */
export function patientCompartment(): ReadonlyMap<string, readonly string[]> {
  memo ??= new Map(
    Object.entries(COMPARTMENTS.Patient ?? {}).filter(
      ([type, params]) => params.length > 0 && isResourceType(type),
    ),
  );
  return memo;
}

/** Whether resources of `type` can be in a Patient compartment (Patient itself included). */
export function inPatientCompartment(type: string): boolean {
  return type === 'Patient' || patientCompartment().has(type);
}
