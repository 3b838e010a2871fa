// The rows a token narrowed by SMART `patient/` scopes reaches (fhir/access.ts patientReach): those in the Patient
// compartment of the patient in context (https://hl7.org/fhir/R4/compartmentdefinition-patient.html), as a SQL
// condition on a `resources` alias, for searches, includes, chains, history and reads alike.
import { compartmentParams } from '../definitions/compartments.js';
import { patientCompartment } from '../definitions/patient-compartment.js';
import type { AccessScope } from '../types.js';

type Bind = (v: unknown) => string;

let pairs: string[] | undefined;
/** `<type> <param>` of every Patient-compartment parameter, for rows whose type is not known in advance. */
function compartmentPairs(): string[] {
  pairs ??= [...patientCompartment()].flatMap(([t, codes]) => codes.map((c) => `${t} ${c}`));
  return pairs;
}

/**
 * The condition on rows of alias `a` (of `resourceType`, when all rows are of one type) that the scope's patient
 * reaches: the unlimited types, the Patient itself, and resources whose compartment parameters reference it.
 * Undefined when the scope is not narrowed (or the type is unlimited).
 */
export function patientCondition(
  scope: Pick<AccessScope, 'patient'>,
  a: string,
  bind: Bind,
  resourceType?: string,
): string | undefined {
  const p = scope.patient;
  if (!p) return undefined;
  const ref = bind(`Patient/${p.id}`);
  if (resourceType !== undefined) {
    if (p.unlimited.includes(resourceType)) return undefined;
    const params = compartmentParams('Patient', resourceType).filter((c) => c !== '{def}');
    const alts: string[] = [];
    if (resourceType === 'Patient') alts.push(`${a}.id = ${bind(p.id)}`);
    if (params.length > 0) {
      alts.push(
        `${a}.rid IN (SELECT pr.rid FROM sp_reference pr WHERE pr.resource_type = ${bind(resourceType)} ` +
          `AND pr.code = ANY(${bind(params)}::text[]) AND pr.ref = ${ref})`,
      );
    }
    return alts.length ? `(${alts.join(' OR ')})` : 'FALSE';
  }
  const alts = [
    `(${a}.resource_type = 'Patient' AND ${a}.id = ${bind(p.id)})`,
    `EXISTS (SELECT 1 FROM sp_reference pr WHERE pr.rid = ${a}.rid AND pr.ref = ${ref} ` +
      `AND pr.resource_type || ' ' || pr.code = ANY(${bind(compartmentPairs())}::text[]))`,
  ];
  if (p.unlimited.length) alts.unshift(`${a}.resource_type = ANY(${bind(p.unlimited)}::text[])`);
  return `(${alts.join(' OR ')})`;
}
