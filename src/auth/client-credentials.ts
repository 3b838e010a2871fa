// The client_credentials grant (RFC 6749 §4.4): a ClientApplication's id and secret → an access token
// scoped to the ClientApplication's membership.
import { timingSafeEqual } from 'node:crypto';
import { readCredential, sha256 } from '../fhir/repository/secrets.js';
import { selectCurrent } from '../fhir/repository/store.js';
import type { AuthDeps } from './deps.js';
import { issueLogin, type TokenResponse } from './issue-login.js';
import { OAuthError } from './oauth-error.js';
import { membershipsOfUser } from './principal.js';

function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}

export async function clientCredentialsGrant(
  deps: AuthDeps,
  clientId: string | undefined,
  clientSecret: string | undefined,
): Promise<TokenResponse> {
  if (!clientId || !clientSecret)
    throw new OAuthError('invalid_request', 'client_id and client_secret are required');
  const bad = new OAuthError('invalid_client', 'Invalid client credentials');
  if (!/^[A-Za-z0-9\-.]{1,64}$/.test(clientId)) throw bad;
  const client = await selectCurrent(deps.db, 'ClientApplication', clientId);
  if (!client || client.deleted) throw bad;
  const stored = await readCredential(deps.db, 'ClientApplication', clientId, 'client_secret');
  if (!stored || !sameHash(stored, sha256(clientSecret))) throw bad;
  const memberships = (await membershipsOfUser(deps.db, `ClientApplication/${clientId}`)).filter(
    (m) => (JSON.parse(m.json) as { active?: boolean }).active !== false,
  );
  const membership = memberships[0];
  if (!membership) throw new OAuthError('invalid_client', 'The client has no project membership');
  const profile =
    (JSON.parse(membership.json) as { profile?: { reference?: string } }).profile?.reference ??
    `ClientApplication/${clientId}`;
  return issueLogin(
    deps,
    {
      membershipId: membership.id,
      projectId: membership.project_id,
      profile,
      clientId,
      authMethod: 'client_credentials',
    },
    { sub: clientId },
  );
}
