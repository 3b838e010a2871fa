// The rows a token narrowed by SMART `patient/` scopes reaches (fhir/access.ts patientReach): those in the Patient
// compartment of the patient in context (https://hl7.org/fhir/R4/compartmentdefinition-patient.html), as a SQL
// condition on a `resources` alias, for searches, includes, chains, history and reads alike.
import { compartmentParams } from '../definitions/compartments.js';
import { patientCompartment } from '../definitions/patient-compartment.js';
import type { AccessScope, Resource } from '../types.js';
import { extractValues } from './extract.js';
import { withNarrower } from './reference-pairs.js';
import { getSearchParam } from './registry.js';

type Bind = (v: unknown) => string;

let pairs: string[] | undefined;
/**
 * `<type> <code>` of every Patient-compartment parameter's reference rows (with the narrower codes that hold some of
 * them: reference-pairs.ts), for rows whose type is not known in advance.
 */
function compartmentPairs(): string[] {
  pairs ??= [...patientCompartment()].flatMap(([t, codes]) => withNarrower(t, codes).map((c) => `${t} ${c}`));
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
    if (params.length > 0)
      alts.push(
        referencedBy(a, bind(resourceType), withNarrower(resourceType, params), [`Patient/${p.id}`], bind),
      );
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

/**
 * The Patient references of one version of a resource through its Patient-compartment parameters, evaluated on its
 * JSON as the index writer would index it: `Patient/<id>`, or `null` for a reference whose target the server cannot
 * tell (no `Type/id` shape, no Patient-excluding type hint), which may name any patient.
 */
export function compartmentPatients(resource: Resource): (string | null)[] {
  const out: (string | null)[] = [];
  for (const code of compartmentParams('Patient', resource.resourceType)) {
    const param = getSearchParam(resource.resourceType, code);
    if (!param) continue;
    for (const v of extractValues(resource, param)) {
      if (v.t !== 'reference') continue;
      if (v.targetType === 'Patient') out.push(v.targetId === null ? null : v.ref);
      else if (v.targetType === null) out.push(null);
    }
  }
  return out;
}

/**
 * Whether one version of a resource is in the reach of `patient` (AccessScope.patient; always when undefined), judged
 * on that version's own content: a vread or history entry of a resource that moved between patients follows the
 * compartment each version was in, not the current one's (the search index holds only the current version).
 */
export function versionInReach(patient: AccessScope['patient'], resource: Resource): boolean {
  if (!patient || patient.unlimited.includes(resource.resourceType)) return true;
  if (resource.resourceType === 'Patient' && resource.id === patient.id) return true;
  return compartmentPatients(resource).includes(`Patient/${patient.id}`);
}

/**
 * Whether a write bounded by `patient/` scopes may leave (or change) this version: it is in the patient's compartment
 * and every Patient its compartment parameters name is that patient — an Observation whose `performer` is the patient
 * in context and whose `subject` is another patient would otherwise write into that other patient's record.
 */
export function whollyInCompartment(patientId: string, resource: Resource): boolean {
  const refs = compartmentPatients(resource);
  const own = `Patient/${patientId}`;
  if (refs.some((r) => r !== own)) return false;
  return refs.length > 0 || (resource.resourceType === 'Patient' && resource.id === patientId);
}
