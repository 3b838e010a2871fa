// Client authentication at the token endpoint for the grants a user's login goes through (authorization_code,
// refresh_token): RFC 6749 §2.3 — HTTP Basic or client_id + client_secret in the body (§2.3.1), or a client assertion
// (private_key_jwt, RFC 7523 §2.2; SMART https://hl7.org/fhir/smart-app-launch/client-confidential-asymmetric.html).
//
// Which clients are confidential (RFC 6749 §2.1): every ClientApplication holds a secret — one is generated and shown
// once when a client is created without one — so a stored secret alone cannot tell a server-side app from a browser
// or mobile app that threw it away (the console, fhirclient apps). A client is confidential when its administrator
// *wrote* a `secret` (the `client_secret_set` credential, src/fhir/repository/secrets.ts) or registered a `jwksUri`
// (it holds a private key): such a client redeems its codes and refresh tokens only with that proof. Any other client
// is public and redeems with PKCE alone, as before; a secret it does send must still be right.
import type { Queryable } from '../storage/db.js';
import { authenticateByAssertion, type AssertionLogger } from './client-assertion.js';
import { clientSecretMatches } from './client-credentials.js';
import type { ClientKeySets } from './client-jwks.js';
import type { AuthDeps } from './deps.js';
import { OAuthError } from './oauth-error.js';

/** What a token request presents about its client. */
export interface ClientCredentials {
  clientId?: string;
  secret?: string;
  assertion?: string;
  assertionType?: string;
}

/** The client a request names, and the client it proved to be (when it authenticated). */
export interface ClientIdentity {
  clientId?: string;
  authenticated?: string;
}

/** Checks the credentials a request presents; a wrong secret or assertion is 401 invalid_client. */
export async function authenticateClient(
  deps: AuthDeps,
  keySets: ClientKeySets,
  creds: ClientCredentials,
  opts: { log?: AssertionLogger } = {},
): Promise<ClientIdentity> {
  if (creds.assertion !== undefined || creds.assertionType !== undefined) {
    const id = await authenticateByAssertion(
      deps,
      keySets,
      {
        ...(creds.assertionType !== undefined ? { assertionType: creds.assertionType } : {}),
        ...(creds.assertion !== undefined ? { assertion: creds.assertion } : {}),
        ...(creds.clientId !== undefined ? { clientId: creds.clientId } : {}),
      },
      opts,
    );
    return { clientId: id, authenticated: id };
  }
  if (creds.secret !== undefined) {
    if (!creds.clientId || !(await clientSecretMatches(deps, creds.clientId, creds.secret))) {
      throw new OAuthError('invalid_client', 'Invalid client credentials');
    }
    return { clientId: creds.clientId, authenticated: creds.clientId };
  }
  return creds.clientId !== undefined ? { clientId: creds.clientId } : {};
}

/** Whether the client must authenticate to redeem what was issued to it (see the head of this file). */
export async function isConfidentialClient(q: Queryable, clientId: string): Promise<boolean> {
  const r = await q.query<{ confidential: boolean }>(
    `SELECT EXISTS (
         SELECT 1 FROM credentials s JOIN credentials c
           ON c.resource_type = s.resource_type AND c.id = s.id AND c.kind = 'client_secret' AND c.hash = s.hash
         WHERE s.resource_type = 'ClientApplication' AND s.id = $1 AND s.kind = 'client_secret_set')
       OR EXISTS (
         SELECT 1 FROM resources r WHERE r.resource_type = 'ClientApplication' AND r.id = $1 AND NOT r.deleted
           AND coalesce(r.content->>'jwksUri', '') <> '') AS confidential`,
    [clientId],
  );
  return r.rows[0]?.confidential === true;
}

/**
 * RFC 6749 §4.1.3 and §6: what was issued to a confidential client is redeemed only by that client, authenticated.
 * Answers the refusal, or undefined when the request may go on.
 */
export async function clientProofRefusal(
  q: Queryable,
  issuedTo: string | undefined,
  client: ClientIdentity,
): Promise<OAuthError | undefined> {
  if (issuedTo === undefined || client.authenticated === issuedTo) return undefined;
  if (!(await isConfidentialClient(q, issuedTo))) return undefined;
  return new OAuthError(
    'invalid_client',
    'This client must authenticate (client secret or client assertion)',
  );
}
