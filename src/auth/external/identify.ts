// Identifies the user of a validated external token (seed §5.3–5.6, API.md §4): `fhirUser` (or `ext.fhirUser`)
// first — a profile found across all projects, then its one membership — else `sub` against
// ProjectMembership.externalId. Every miss or ambiguity is a refusal (401 for the caller). A fhirUser names only a
// Patient, Practitioner or RelatedPerson, and only resources that are the profile of a membership of their own
// project count, so no project can block another's logins by copying an identifier.
import { isResourceType } from '../../fhir/definitions/index.js';
import { selectCurrent } from '../../fhir/repository/store.js';
import { executeSearch } from '../../fhir/search/execute.js';
import { parseSearchRequest } from '../../fhir/search/parse.js';
import type { Queryable } from '../../storage/db.js';
import { EXTERNAL_PROFILE_TYPES, usableMembership } from '../login-rules.js';
import type { ExternalIdentity } from './validate-external-token.js';

export type FhirUserRef = { type: string; id: string } | { type: string; query: Record<string, string> };

export class IdentifyError extends Error {
  constructor(
    readonly reason:
      | 'no-identity'
      | 'bad-fhir-user'
      | 'no-profile'
      | 'several-profiles'
      | 'no-membership'
      | 'several-memberships',
    message: string,
  ) {
    super(message);
    this.name = 'IdentifyError';
  }
}

/** `Type/id`, `Type?param=value` (`|` may be `%7C`), or an absolute URL ending in either (its host is ignored). */
export function parseFhirUser(value: string): FhirUserRef | undefined {
  let path = value.trim();
  let search = '';
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(path)) {
    let url: URL;
    try {
      url = new URL(path);
    } catch {
      return undefined;
    }
    path = url.pathname;
    search = url.search.slice(1);
  } else if (path.includes('?')) {
    search = path.slice(path.indexOf('?') + 1);
    path = path.slice(0, path.indexOf('?'));
  }
  const segments = path.split('/').filter((s) => s.length > 0);
  if (search) {
    const type = segments[segments.length - 1];
    if (!type || !isResourceType(type)) return undefined;
    const query: Record<string, string> = {};
    for (const [k, v] of new URLSearchParams(search)) query[k] = v;
    return Object.keys(query).length ? { type, query } : undefined;
  }
  const type = segments[segments.length - 2];
  const id = segments[segments.length - 1];
  if (!type || !id || !isResourceType(type) || !/^[A-Za-z0-9\-.]{1,64}$/.test(id)) return undefined;
  return { type, id };
}

export interface ExternalMatch {
  membershipId: string;
  projectId: string;
  /** `<Type>/<id>` of the profile. */
  profile: string;
}

interface MembershipRow {
  id: string;
  project_id: string;
  profile: string;
}

/** Memberships that can be logged in through (login-rules.ts) where `column` equals `value`; at most two. */
async function membershipsWhere(
  db: Queryable,
  column: 'profile' | 'externalId',
  value: string,
): Promise<MembershipRow[]> {
  const where = column === 'profile' ? `m.content->'profile'->>'reference'` : `m.content->>'externalId'`;
  const r = await db.query<MembershipRow>(
    `SELECT m.id, m.project_id, m.content->'profile'->>'reference' AS profile
     FROM resources m JOIN resources p ON p.resource_type = 'Project' AND p.id = m.project_id
     WHERE ${where} = $1 AND ${usableMembership('m', 'p')}
     LIMIT 2`,
    [value],
  );
  return r.rows;
}

async function findProfile(db: Queryable, ref: FhirUserRef): Promise<string> {
  if ('id' in ref) {
    const row = await selectCurrent(db, ref.type, ref.id);
    if (!row || row.deleted) throw new IdentifyError('no-profile', 'fhirUser names no profile');
    return `${ref.type}/${ref.id}`;
  }
  let matches;
  try {
    // Only resources that are some membership's profile count: a copy of the identifier elsewhere is no profile.
    matches = (
      await executeSearch(db, parseSearchRequest(ref.type, { ...ref.query, _count: '2' }), {
        projectId: null,
        memberProfiles: true,
      })
    ).matches;
  } catch {
    throw new IdentifyError('bad-fhir-user', 'fhirUser is not a valid search');
  }
  if (matches.length === 0) throw new IdentifyError('no-profile', 'fhirUser matches no profile');
  if (matches.length > 1) throw new IdentifyError('several-profiles', 'fhirUser matches several profiles');
  const m = matches[0] as { resourceType: string; id: string };
  return `${m.resourceType}/${m.id}`;
}

function one(rows: MembershipRow[], what: string): MembershipRow {
  if (rows.length === 0)
    throw new IdentifyError('no-membership', `No project membership matches the ${what}`);
  if (rows.length > 1)
    throw new IdentifyError('several-memberships', `Several project memberships match the ${what}`);
  return rows[0] as MembershipRow;
}

export async function identifyExternal(
  db: Queryable,
  identity: Pick<ExternalIdentity, 'fhirUser' | 'sub'>,
): Promise<ExternalMatch> {
  if (identity.fhirUser !== undefined) {
    const ref = parseFhirUser(identity.fhirUser);
    if (!ref)
      throw new IdentifyError(
        'bad-fhir-user',
        'fhirUser is not a reference, a search or a URL ending in either',
      );
    if (!EXTERNAL_PROFILE_TYPES.has(ref.type)) {
      // A ClientApplication, User or ProjectMembership is no person's profile (API.md §4).
      throw new IdentifyError(
        'bad-fhir-user',
        'fhirUser may name only a Patient, Practitioner or RelatedPerson',
      );
    }
    const profile = await findProfile(db, ref);
    const m = one(await membershipsWhere(db, 'profile', profile), 'fhirUser profile');
    return { membershipId: m.id, projectId: m.project_id, profile };
  }
  if (identity.sub !== undefined) {
    const m = one(await membershipsWhere(db, 'externalId', identity.sub), 'token subject (externalId)');
    return { membershipId: m.id, projectId: m.project_id, profile: m.profile };
  }
  throw new IdentifyError('no-identity', 'The token has neither fhirUser nor sub');
}
