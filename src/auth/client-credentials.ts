// The client_credentials grant (RFC 6749 §4.4): a ClientApplication's id and secret → an access token
// scoped to the ClientApplication's membership. A client logs in only through a membership of its own project
// (API.md §3), so a membership that another project made for it (or restored data) lends it nothing. A `scope` of SMART
// system scopes narrows the token (https://hl7.org/fhir/smart-app-launch/backend-services.html).
import { timingSafeEqual } from 'node:crypto';
import { readCredential, sha256 } from '../fhir/repository/secrets.js';
import { selectCurrent } from '../fhir/repository/store.js';
import type { AuthDeps } from './deps.js';
import { issueLogin, type TokenResponse } from './issue-login.js';
import { OAuthError } from './oauth-error.js';
import { activeMembershipsOfUser } from './principal.js';
import { grantClientScope, type GrantRules } from './smart-scopes.js';

function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}

export async function clientCredentialsGrant(
  deps: AuthDeps,
  clientId: string | undefined,
  clientSecret: string | undefined,
  scope?: string,
): Promise<TokenResponse> {
  if (!clientId || !clientSecret)
    throw new OAuthError('invalid_request', 'client_id and client_secret are required');
  const bad = new OAuthError('invalid_client', 'Invalid client credentials');
  if (!CLIENT_ID.test(clientId)) throw bad;
  const client = await selectCurrent(deps.db, 'ClientApplication', clientId);
  if (!client || client.deleted) throw bad;
  if (!(await clientSecretMatches(deps, clientId, clientSecret))) throw bad;
  return loginAsClient(deps, clientId, client, scope);
}

/** Whether `secret` is the stored secret of the ClientApplication (compared as hashes, in constant time). */
export async function clientSecretMatches(
  deps: Pick<AuthDeps, 'db'>,
  clientId: string,
  secret: string,
): Promise<boolean> {
  if (!CLIENT_ID.test(clientId)) return false;
  const stored = await readCredential(deps.db, 'ClientApplication', clientId, 'client_secret');
  return stored !== undefined && sameHash(stored, sha256(secret));
}

export const CLIENT_ID = /^[A-Za-z0-9\-.]{1,64}$/;

/**
 * The login of a ClientApplication that has proven who it is (its secret, or a signed assertion: client-assertion.ts),
 * with the scope it asked for within its role (smart-scopes.ts). Both ways of proof share these rules.
 */
export async function loginAsClient(
  deps: AuthDeps,
  clientId: string,
  client: { json: string; project_id: string },
  scope: string | undefined,
  opts: GrantRules & {
    /** Runs once the login would succeed, before the token is issued (a client assertion's jti is used up here). */
    beforeIssue?: () => Promise<void>;
  } = {},
): Promise<TokenResponse> {
  // After the proof, so that only the client's holder learns why it cannot log in.
  // ClientApplication.status is `active | error | off`: only an active client (or one without status) logs in.
  const status = (JSON.parse(client.json) as { status?: unknown }).status;
  if (status !== undefined && status !== 'active') {
    throw new OAuthError('invalid_client', 'The client is not active');
  }
  const [membership] = await activeMembershipsOfUser(
    deps.db,
    `ClientApplication/${clientId}`,
    client.project_id,
  );
  if (!membership) {
    throw new OAuthError('invalid_client', 'The client has no active membership in its own project');
  }
  const granted = grantClientScope(
    { projectId: membership.project_id, projectAdmin: membership.admin, superAdmin: membership.super_admin },
    scope,
    opts,
  );
  await opts.beforeIssue?.();
  return issueLogin(
    deps,
    {
      membershipId: membership.id,
      projectId: membership.project_id,
      profile: membership.profile,
      clientId,
      authMethod: 'client_credentials',
    },
    { sub: clientId, scope: granted },
  );
}
