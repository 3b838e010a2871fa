// client_credentials with a signed client assertion instead of a secret (RFC 7523 §2.2 and §3; SMART Backend Services,
// https://hl7.org/fhir/smart-app-launch/client-confidential-asymmetric.html): a JWT from the client, signed with a key
// of its ClientApplication.jwksUri, iss = sub = client id, aud = our token endpoint, exp at most 5 minutes ahead, a jti
// used once. Every failure answers the same 401 invalid_client; the reason goes to the operator's log only.
import {
  createLocalJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  errors,
  jwtVerify,
  type JWTPayload,
} from 'jose';
import { selectCurrent } from '../fhir/repository/store.js';
import type { Queryable } from '../storage/db.js';
import { CLIENT_ID, loginAsClient } from './client-credentials.js';
import { KeySetError, type ClientKeySets } from './client-jwks.js';
import { nowSeconds, type AuthDeps } from './deps.js';
import type { TokenResponse } from './issue-login.js';
import { OAuthError } from './oauth-error.js';

export const JWT_BEARER_ASSERTION = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** SMART requires RS384 and ES384 of servers; RS256 and ES256 are common in client libraries. */
export const ASSERTION_ALGORITHMS = ['RS384', 'ES384', 'RS256', 'ES256'];
/** SMART: exp "no more than five minutes in the future". */
const MAX_LIFETIME_SECONDS = 300;
/**
 * Clocks differ, and clients round: the bulk-data-client sends exp = round(now) + 300. Both limits (five minutes
 * ahead, not yet expired) allow this much difference between the client's clock and ours.
 */
const CLOCK_SKEW_SECONDS = 30;
const MAX_ASSERTION_LENGTH = 16 * 1024;

export interface ClientAssertionParams {
  assertionType?: string;
  assertion?: string;
  /** The form's client_id: optional, and then it must be the assertion's issuer. */
  clientId?: string;
  scope?: string;
}

export interface AssertionLogger {
  info?(obj: object, msg: string): void;
}

/** Why an assertion was refused, for the log; the caller always gets ASSERTION_REFUSED. */
class Refusal extends Error {
  constructor(readonly reason: string) {
    super(reason);
  }
}

const refused = (reason: string): Refusal => new Refusal(reason);

/** The client id an assertion claims to come from (unverified: used to find the client and its keys). */
export function assertionIssuer(assertion: string | undefined): string | undefined {
  if (!assertion) return undefined;
  try {
    const iss = decodeJwt(assertion).iss;
    return typeof iss === 'string' ? iss : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Records the assertion's jti until its exp; false when it was seen before (a replay). One statement, so two
 * instances racing with one jti cannot both succeed; an expired row with the same jti is taken over.
 */
async function firstUse(
  db: Queryable,
  clientId: string,
  jti: string,
  exp: number,
  now: number,
): Promise<boolean> {
  await db.query('DELETE FROM client_assertion_jtis WHERE expires_at < $1', [new Date(now * 1000)]);
  const r = await db.query(
    `INSERT INTO client_assertion_jtis (client_id, jti, expires_at) VALUES ($1, $2, $3)
     ON CONFLICT (client_id, jti) DO UPDATE SET expires_at = EXCLUDED.expires_at
       WHERE client_assertion_jtis.expires_at < $4
     RETURNING jti`,
    [clientId, jti, new Date(exp * 1000), new Date(now * 1000)],
  );
  return r.rows.length > 0;
}

async function verifiedClaims(
  deps: AuthDeps,
  keySets: ClientKeySets,
  assertion: string,
  clientId: string,
  jwksUri: string,
): Promise<JWTPayload> {
  let header;
  try {
    header = decodeProtectedHeader(assertion);
  } catch {
    throw refused('not a JWS');
  }
  if (typeof header.kid !== 'string' || header.kid === '') throw refused('no kid in the header');
  if (!ASSERTION_ALGORITHMS.includes(header.alg ?? '')) throw refused(`algorithm ${String(header.alg)}`);
  // SMART: a jku header must be the registered JWK Set URL; keys are only ever taken from jwksUri.
  if (header.jku !== undefined && header.jku !== jwksUri) throw refused('jku is not the registered jwksUri');
  let keys;
  try {
    keys = await keySets.get(jwksUri, header.kid);
  } catch (err) {
    if (err instanceof KeySetError) throw refused(`jwksUri: ${err.reason}`);
    throw err;
  }
  const now = nowSeconds(deps);
  try {
    const { payload } = await jwtVerify(assertion, createLocalJWKSet(keys), {
      algorithms: ASSERTION_ALGORITHMS,
      issuer: clientId,
      subject: clientId,
      audience: `${deps.tokens.issuer}oauth2/token`,
      requiredClaims: ['exp', 'jti'],
      currentDate: new Date(now * 1000),
      clockTolerance: CLOCK_SKEW_SECONDS,
    });
    if (typeof payload.exp !== 'number' || payload.exp - now > MAX_LIFETIME_SECONDS + CLOCK_SKEW_SECONDS)
      throw refused('exp more than 5 minutes ahead');
    if (typeof payload.jti !== 'string' || payload.jti === '' || payload.jti.length > 256)
      throw refused('bad jti');
    return payload;
  } catch (err) {
    if (err instanceof Refusal) throw err;
    if (err instanceof errors.JOSEError) throw refused(`${err.code}: ${err.message}`);
    throw err;
  }
}

/** A checked assertion: the client it proves, that client's row, and the claims (jti not yet recorded). */
interface CheckedAssertion {
  clientId: string;
  client: { json: string; project_id: string };
  claims: JWTPayload;
}

/** Every check of an assertion but the jti's single use; throws a Refusal. */
async function checkAssertion(
  deps: AuthDeps,
  keySets: ClientKeySets,
  params: ClientAssertionParams,
  clientId: string | undefined,
): Promise<CheckedAssertion> {
  const assertion = params.assertion as string;
  if (assertion.length > MAX_ASSERTION_LENGTH) throw refused('assertion too long');
  if (!clientId || !CLIENT_ID.test(clientId)) throw refused('no valid client id');
  if (assertionIssuer(assertion) !== clientId) throw refused('client_id is not the assertion issuer');
  const client = await selectCurrent(deps.db, 'ClientApplication', clientId);
  if (!client || client.deleted) throw refused('unknown client');
  const jwksUri = (JSON.parse(client.json) as { jwksUri?: unknown }).jwksUri;
  if (typeof jwksUri !== 'string' || jwksUri === '') throw refused('the client has no jwksUri');
  const claims = await verifiedClaims(deps, keySets, assertion, clientId, jwksUri);
  return { clientId, client, claims };
}

function requireAssertion(params: ClientAssertionParams): void {
  if (params.assertionType !== JWT_BEARER_ASSERTION)
    throw new OAuthError('invalid_request', `client_assertion_type must be ${JWT_BEARER_ASSERTION}`);
  if (!params.assertion) throw new OAuthError('invalid_request', 'client_assertion is required');
}

/** Logs why an assertion was refused and answers the one error every refusal gets. */
function refusedAssertion(err: Refusal, clientId: string | undefined, log?: AssertionLogger): OAuthError {
  log?.info?.({ clientId: clientId?.slice(0, 64), reason: err.reason }, 'client assertion refused');
  return new OAuthError('invalid_client', 'Invalid client assertion');
}

/** The client_credentials grant authenticated by a client assertion; every failure is one 401 invalid_client. */
export async function clientAssertionGrant(
  deps: AuthDeps,
  keySets: ClientKeySets,
  params: ClientAssertionParams,
  opts: { log?: AssertionLogger } = {},
): Promise<TokenResponse> {
  requireAssertion(params);
  const clientId = params.clientId ?? assertionIssuer(params.assertion);
  try {
    const checked = await checkAssertion(deps, keySets, params, clientId);
    // Recorded only once the signature holds (nobody else can use up a client's jti values) and the login would
    // succeed: an assertion refused for its scope may be sent again with another scope.
    return await loginAsClient(deps, checked.clientId, checked.client, params.scope, {
      backendServices: true,
      beforeIssue: async () => {
        const { jti, exp } = checked.claims as { jti: string; exp: number };
        if (!(await firstUse(deps.db, checked.clientId, jti, exp, nowSeconds(deps))))
          throw refused('jti already used');
      },
    });
  } catch (err) {
    if (!(err instanceof Refusal)) throw err;
    throw refusedAssertion(err, clientId, opts.log);
  }
}

/**
 * Client authentication by assertion (private_key_jwt, RFC 7523 §2.2) for the other grants of the token endpoint
 * (authorization_code, refresh_token): the same checks, the jti used up at once. Answers the client id it proves.
 */
export async function authenticateByAssertion(
  deps: AuthDeps,
  keySets: ClientKeySets,
  params: ClientAssertionParams,
  opts: { log?: AssertionLogger } = {},
): Promise<string> {
  requireAssertion(params);
  const clientId = params.clientId ?? assertionIssuer(params.assertion);
  try {
    const { claims } = await checkAssertion(deps, keySets, params, clientId);
    const { jti, exp } = claims as { jti: string; exp: number };
    if (!(await firstUse(deps.db, clientId as string, jti, exp, nowSeconds(deps))))
      throw refused('jti already used');
    return clientId as string;
  } catch (err) {
    if (!(err instanceof Refusal)) throw err;
    throw refusedAssertion(err, clientId, opts.log);
  }
}
