// What a token narrowed by SMART `patient/` scopes reaches among stored resources
// (https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html): reads see, and writes leave, only resources
// in the Patient compartment of the patient in context (fhir/access.ts scopeReach).
import type { Queryable } from '../../storage/db.js';
import { patientWriteReach, type WriteInteraction } from '../access.js';
import { FhirError } from '../outcome.js';
import { patientCondition } from '../search/patient-reach.js';
import type { AccessScope } from '../types.js';
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

/** Whether a write of this type by this caller is bounded by a patient's compartment (then run it in a transaction). */
export function writeNarrowed(
  ctx: RepoContext,
  resourceType: string,
  interaction: WriteInteraction,
): boolean {
  return patientWriteReach(ctx.actor, resourceType, interaction) !== undefined;
}

/**
 * 403 unless the resource, as the open transaction has it now, is in the compartment of the patient whose
 * `patient/` scopes permit this write: checked before an update or delete (what is changed) and after a create or
 * update (what was written), so a patient-scoped token neither changes nor makes another patient's data.
 */
export async function assertWriteReach(
  tx: Queryable,
  ctx: RepoContext,
  row: Pick<StoredRow, 'resource_type' | 'id'>,
  interaction: WriteInteraction,
): Promise<void> {
  const patient = patientWriteReach(ctx.actor, row.resource_type, interaction);
  if (patient === undefined || (await inReach(tx, { id: patient, unlimited: [] }, row))) return;
  throw new FhirError(
    'forbidden',
    `Forbidden: ${row.resource_type}/${row.id} is not in the compartment of Patient/${patient}, which the token's patient scopes are limited to`,
    'access.patient-compartment',
  );
}
