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
 * Rows of alias `a` (of the type `typeSql`, a bound value) that one of `codes` references as one of `refs`
 * (`Type/id`, as the reference index holds a reference with a target id: normalise.ts), found through that index
 * (type, param, ref) whatever the size of the table. `extra` narrows the index rows (alias `x`).
 */
export function referencedBy(
  a: string,
  typeSql: string,
  codes: readonly string[],
  refs: readonly string[],
  bind: Bind,
  extra = '',
): string {
  const ref = refs.length === 1 ? `= ${bind(refs[0])}` : `= ANY(${bind(refs)}::text[])`;
  return (
    `${a}.rid IN (SELECT x.rid FROM sp_reference x WHERE x.resource_type = ${typeSql}${extra} ` +
    `AND x.code = ANY(${bind(codes)}::text[]) AND x.ref ${ref})`
  );
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
  if (resourceType !== undefined) {
    if (p.unlimited.includes(resourceType)) return undefined;
    const params = compartmentParams('Patient', resourceType).filter((c) => c !== '{def}');
    const alts: string[] = [];
    if (resourceType === 'Patient') alts.push(`${a}.id = ${bind(p.id)}`);
    if (params.length > 0) alts.push(referencedBy(a, bind(resourceType), params, [`Patient/${p.id}`], bind));
    return alts.length ? `(${alts.join(' OR ')})` : 'FALSE';
  }
  const ref = bind(`Patient/${p.id}`);
  const alts = [
    `(${a}.resource_type = 'Patient' AND ${a}.id = ${bind(p.id)})`,
    `EXISTS (SELECT 1 FROM sp_reference pr WHERE pr.rid = ${a}.rid AND pr.ref = ${ref} ` +
      `AND pr.resource_type || ' ' || pr.code = ANY(${bind(compartmentPairs())}::text[]))`,
  ];
  if (p.unlimited.length) alts.unshift(`${a}.resource_type = ANY(${bind(p.unlimited)}::text[])`);
  return `(${alts.join(' OR ')})`;
}
