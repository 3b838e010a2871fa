// GET /oauth2/userinfo (API.md §4, seed §4.1): who the token's user is; for an external provider's token also a
// service access token scoped to the matched membership, never outliving the external token.
import { selectCurrent, type StoredRow } from '../fhir/repository/store.js';
import { unauthorized } from './authenticate.js';
import { nowSeconds, type AuthDeps } from './deps.js';
import { issueLogin } from './issue-login.js';
import { OAuthError } from './oauth-error.js';
import type { Principal } from './principal.js';

interface HumanName {
  text?: string;
  given?: string[];
  family?: string;
}

function names(resource: Record<string, unknown> | undefined): {
  name?: string;
  given?: string;
  family?: string;
} {
  if (!resource) return {};
  if (resource.resourceType === 'ClientApplication' && typeof resource.name === 'string')
    return { name: resource.name };
  const n = Array.isArray(resource.name) ? (resource.name[0] as HumanName | undefined) : undefined;
  if (!n) return {};
  const given = n.given?.join(' ');
  const full = [given, n.family].filter((x) => x).join(' ') || n.text;
  return {
    ...(full ? { name: full } : {}),
    ...(given ? { given } : {}),
    ...(n.family ? { family: n.family } : {}),
  };
}

/**
 * The login's profile, project and membership, each parsed, read fresh: all of the principal's project. The
 * principal was checked against the login rules when it was loaded; this holds even when a membership changed since
 * (a cached principal): a login never answers with another project's resource, it is refused instead.
 */
export async function loginResources(
  deps: Pick<AuthDeps, 'db'>,
  p: Principal,
): Promise<{
  profile: Record<string, unknown>;
  project: Record<string, unknown>;
  membership: Record<string, unknown>;
}> {
  const [type = '', id = ''] = p.profile.split('/');
  const [profile, project, membership] = await Promise.all([
    selectCurrent(deps.db, type, id),
    selectCurrent(deps.db, 'Project', p.projectId),
    selectCurrent(deps.db, 'ProjectMembership', p.membershipId),
  ]);
  const own = (row: StoredRow | undefined): Record<string, unknown> => {
    if (!row || row.deleted || row.project_id !== p.projectId) {
      throw unauthorized('The login of this token has ended', 'auth.login-ended');
    }
    return JSON.parse(row.json) as Record<string, unknown>;
  };
  return { profile: own(profile), project: own(project), membership: own(membership) };
}

async function describe(deps: AuthDeps, p: Principal): Promise<Record<string, unknown>> {
  const { profile, project } = await loginResources(deps, p);
  const n = names(profile);
  const projectName = typeof project.name === 'string' ? project.name : undefined;
  return {
    ...(p.sub ? { sub: p.sub } : {}),
    fhirUser: p.profile,
    ...(n.name ? { name: n.name } : {}),
    ...(n.given ? { given_name: n.given } : {}),
    ...(n.family ? { family_name: n.family } : {}),
    profile: { reference: p.profile, ...(n.name ? { display: n.name } : {}) },
    project: { reference: `Project/${p.projectId}`, ...(projectName ? { display: projectName } : {}) },
    membership: { reference: `ProjectMembership/${p.membershipId}` },
  };
}

export async function userinfo(deps: AuthDeps, p: Principal): Promise<Record<string, unknown>> {
  if (!p.external) return describe(deps, p);
  const now = nowSeconds(deps);
  const key = `userinfo:${p.external.tokenHash}`;
  const known = deps.principals.getIssued(key);
  if (known?.accessToken && known.exp !== undefined && known.exp > now) {
    return {
      ...known.body,
      access_token: known.accessToken,
      token_type: 'Bearer',
      expires_in: known.exp - now,
    };
  }
  const body = await describe(deps, p);
  let issued;
  try {
    issued = await issueLogin(
      deps,
      { membershipId: p.membershipId, projectId: p.projectId, profile: p.profile, authMethod: 'external' },
      { sub: p.sub || p.profile, notAfter: p.external.exp },
    );
  } catch (err) {
    // The membership stopped holding since the token was identified (login-rules.ts).
    if (err instanceof OAuthError) throw unauthorized(err.message, 'auth.external.inactive');
    throw err;
  }
  deps.principals.setIssued(key, { body, accessToken: issued.access_token, exp: now + issued.expires_in });
  return { ...body, access_token: issued.access_token, token_type: 'Bearer', expires_in: issued.expires_in };
}
