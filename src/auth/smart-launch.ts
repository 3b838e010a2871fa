// The `launch` parameter of a SMART EHR launch at the authorize endpoint (API.md §11, SMART App Launch 2.x
// https://hl7.org/fhir/smart-app-launch/app-launch.html#launch-app-ehr-launch): a launch made by
// `ClientApplication/<id>/$launch` (fhir/operations/launch.ts) is looked at when the request arrives and used up, by
// one atomic UPDATE, when the code is issued; unknown, expired, used and other clients' launches are `invalid_request`.
import { sha256 } from '../fhir/repository/secrets.js';
import type { Queryable } from '../storage/db.js';
import type { AuthDeps } from './deps.js';

/**
 * One item of the token response's `fhirContext` (SMART App Launch 2.x,
 * https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html#fhir-context): here always a relative
 * `reference` (`Type/id`) to a resource of the launch's project, neither a Patient nor an Encounter.
 */
export interface FhirContextItem {
  reference: string;
}

/** The context a launch hands to the app's login. */
export interface LaunchContext {
  projectId: string;
  /** The User who started the launch, when a user did: only that user may sign in with it. */
  userId?: string;
  patient: string;
  encounter?: string;
  /** The further resources of the launch (SMART `fhirContext`), when it named any. */
  fhirContext?: FhirContextItem[];
}

interface LaunchRow {
  project_id: string;
  user_id: string | null;
  patient: string;
  encounter: string | null;
  fhir_context: FhirContextItem[] | null;
}

const contextOf = (row: LaunchRow): LaunchContext => ({
  projectId: row.project_id,
  ...(row.user_id !== null ? { userId: row.user_id } : {}),
  patient: row.patient,
  ...(row.encounter !== null ? { encounter: row.encounter } : {}),
  ...(row.fhir_context !== null ? { fhirContext: row.fhir_context } : {}),
});

/** The stored key of a `launch` value (only its hash is kept). */
export const launchHash = (launch: string): string => sha256(launch);

/** The launch of `client_id`, when it exists, is unused and unexpired (nothing is used up here). */
export async function findLaunch(
  db: Queryable,
  deps: Pick<AuthDeps, 'clock'>,
  hash: string,
  clientId: string,
): Promise<LaunchContext | undefined> {
  const r = await db.query<LaunchRow>(
    `SELECT project_id, user_id, patient, encounter, fhir_context FROM smart_launches
     WHERE launch_hash = $1 AND client_id = $2 AND used_at IS NULL AND expires_at > $3`,
    [hash, clientId, deps.clock()],
  );
  const row = r.rows[0];
  return row ? contextOf(row) : undefined;
}

/**
 * Uses the launch up: of two requests (or two server instances) presenting it, exactly one gets its context, since
 * `used_at IS NULL` is checked and set by the same statement.
 */
export async function redeemLaunch(
  db: Queryable,
  deps: Pick<AuthDeps, 'clock'>,
  hash: string,
  clientId: string,
): Promise<LaunchContext | undefined> {
  const now = deps.clock();
  const r = await db.query<LaunchRow>(
    `UPDATE smart_launches SET used_at = $3
     WHERE launch_hash = $1 AND client_id = $2 AND used_at IS NULL AND expires_at > $3
     RETURNING project_id, user_id, patient, encounter, fhir_context`,
    [hash, clientId, now],
  );
  const row = r.rows[0];
  return row ? contextOf(row) : undefined;
}
