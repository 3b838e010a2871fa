// What a token narrowed by SMART `patient/` scopes reaches among stored resources
// (https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html): reads see, and writes leave, only resources
// in the Patient compartment of the patient in context (fhir/access.ts scopeReach).
import type { Queryable } from '../../storage/db.js';
import { patientWriteReach, type WriteInteraction } from '../access.js';
import { parseJson } from '../json/parse.js';
import { FhirError } from '../outcome.js';
import { patientCondition, versionInReach, whollyInCompartment } from '../search/patient-reach.js';
import type { AccessScope, Resource } from '../types.js';
import type { RepoContext } from './context.js';
import type { StoredRow } from './store.js';

/**
 * Whether the row is in the reach of `patient` (AccessScope.patient; always when undefined), judged on the
 * resource's current search index.
 */
export async function inReach(
  db: Queryable,
  patient: AccessScope['patient'],
  row: Pick<StoredRow, 'resource_type' | 'id'>,
): Promise<boolean> {
  const values: unknown[] = [];
  const cond = patientCondition({ patient }, 'r', (v) => `$${values.push(v)}`, row.resource_type);
  if (!cond) return true;
  const r = await db.query(
    `SELECT 1 FROM resources r WHERE r.resource_type = $${values.push(row.resource_type)} ` +
      `AND r.id = $${values.push(row.id)} AND ${cond}`,
    values,
  );
  return r.rows.length > 0;
}

/**
 * Whether a stored version (of a vread or a history) is in the reach of `patient`, judged on that version's own
 * content: a resource moved between patients shows each patient only the versions that were in their compartment.
 */
export function versionRowInReach(
  patient: AccessScope['patient'],
  row: { resource_type: string; json: string | null },
): boolean {
  if (!patient || patient.unlimited.includes(row.resource_type)) return true;
  return row.json !== null && versionInReach(patient, parseJson(row.json) as Resource);
}

/**
 * 403 unless a version a write leaves, or one it changes, is wholly the business of the patient whose `patient/`
 * scopes permit this write: in that patient's compartment, and naming no other patient through a compartment
 * parameter. Called by prepareWrite on every version written (what a write makes) and by update, patch and delete
 * on the current version (what a write changes), so a patient-scoped token neither changes nor makes another
 * patient's data. Nothing to check when a `system/` or `user/` scope permits the write; a 403 when no scope does.
 */
export function assertWriteReach(
  ctx: RepoContext,
  resource: Resource | string,
  resourceType: string,
  interaction: WriteInteraction,
): void {
  const patient = patientWriteReach(ctx.actor, resourceType, interaction);
  if (patient === undefined) return;
  const version = typeof resource === 'string' ? (parseJson(resource) as Resource) : resource;
  if (whollyInCompartment(patient, version)) return;
  throw new FhirError(
    'forbidden',
    `Forbidden: ${resourceType}/${String(version.id)} is not wholly in the compartment of Patient/${patient}, which the token's patient scopes are limited to: every Patient reference in its compartment parameters must be that patient`,
    'access.patient-compartment',
  );
}
