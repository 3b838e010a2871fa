// The patient picker of a standalone launch asking `launch/patient` (API.md §11, SMART App Launch 2.x
// https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html#launch-context-arrives-with-your-access_token):
// the Patients of the membership's project that its user may read, found by name with the same search and access
// rules as `GET {fhir}/Patient?name=`, for the sign-in page to list.
import { searchScope, type Actor } from '../fhir/access.js';
import { FhirError } from '../fhir/outcome.js';
import { executeSearch } from '../fhir/search/execute.js';
import { parseSearchRequest } from '../fhir/search/parse.js';
import type { AuthDeps } from './deps.js';
import type { ActiveMembership } from './principal.js';

/** At most this many patients are listed; a longer list asks for a more precise name. */
export const PICKER_LIMIT = 20;
/** A search text longer than this is cut (a name, not a document). */
const MAX_SEARCH = 100;

export interface PatientOption {
  id: string;
  label: string;
}

function label(resource: Record<string, unknown>, id: string): string {
  const names = Array.isArray(resource.name) ? (resource.name as Record<string, unknown>[]) : [];
  const n = names[0];
  const given = Array.isArray(n?.given) ? (n.given as unknown[]).filter((g) => typeof g === 'string') : [];
  const text =
    typeof n?.text === 'string'
      ? n.text
      : [...given, typeof n?.family === 'string' ? n.family : ''].join(' ').trim();
  const born = typeof resource.birthDate === 'string' ? `, born ${resource.birthDate}` : '';
  return `${text || 'Unnamed patient'}${born} (Patient/${id})`;
}

const actorOfMembership = (m: ActiveMembership): Actor => ({
  projectId: m.project_id,
  projectAdmin: m.admin,
  superAdmin: m.super_admin,
  membershipId: m.id,
});

/** The patients the membership may read whose name matches `search` (all, when empty), or the one with `id`. */
export async function findPatients(
  deps: Pick<AuthDeps, 'db'>,
  m: ActiveMembership,
  by: { search?: string; id?: string },
): Promise<PatientOption[]> {
  const actor = actorOfMembership(m);
  // The membership's project only, also for a super administrator: the app's login lives there.
  const scope = searchScope(actor, m.profile, 'Patient', { projectId: m.project_id });
  const search = (by.search ?? '').trim().slice(0, MAX_SEARCH);
  const query: Record<string, string> = { _count: String(PICKER_LIMIT), _sort: 'family' };
  if (search !== '') query.name = search;
  if (by.id !== undefined) query._id = by.id;
  let req;
  try {
    req = parseSearchRequest('Patient', query);
  } catch (err) {
    if (err instanceof FhirError) return [];
    throw err;
  }
  const result = await executeSearch(deps.db, req, scope);
  return result.matches.map((r) => ({
    id: r.id,
    label: label(JSON.parse(r.json) as Record<string, unknown>, r.id),
  }));
}
