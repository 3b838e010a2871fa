// The authorization request of the browser code flow (RFC 6749 §4.1.1, SMART App Launch 2.x "Obtain authorization
// code", https://hl7.org/fhir/smart-app-launch/app-launch.html): which errors are shown to the user and which go back
// to the client (RFC 6749 §4.1.2.1), and the server-side transaction that carries a checked request across the
// sign-in form, bound to the browser that started it.
import { generateSecret, sha256 } from '../fhir/repository/secrets.js';
import { selectCurrent } from '../fhir/repository/store.js';
import type { Queryable } from '../storage/db.js';
import { S256_CHALLENGE } from './authorization-code.js';
import { CLIENT_ID } from './client-credentials.js';
import type { AuthDeps } from './deps.js';
import type { OAuthErrorCode } from './oauth-error.js';
import { findLaunch, launchHash } from './smart-launch.js';

/** How long the sign-in form of one authorization request may be used (seconds). */
export const AUTHORIZE_LIFETIME = 600;

/** A checked authorization request: the client and redirect URI are trusted from here on. */
export interface AuthorizeRequest {
  clientId: string;
  redirectUri: string;
  /** Whether the request named redirect_uri (then the token request must name the same, RFC 6749 §4.1.3). */
  redirectUriSent: boolean;
  state?: string;
  scope: string;
  codeChallenge: string;
  nonce?: string;
  /** The hash of the EHR launch's `launch` value (smart-launch.ts), checked when the request came. */
  launchHash?: string;
}

export type AuthorizeCheck =
  /** Client or redirect URI not trusted: shown on a page, never redirected (RFC 6749 §4.1.2.1). */
  | { kind: 'show'; message: string }
  | { kind: 'redirect'; location: string }
  | { kind: 'ok'; request: AuthorizeRequest; clientName: string };

export type Query = Record<string, string | string[] | undefined>;

/** The redirect of an authorization answer: `params` added to the redirect URI's own query (RFC 6749 §4.1.2). */
export function redirectTo(redirectUri: string, params: Record<string, string | undefined>): string {
  const url = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
  return url.toString();
}

export function errorRedirect(
  request: Pick<AuthorizeRequest, 'redirectUri' | 'state'>,
  error: OAuthErrorCode,
  description: string,
): { kind: 'redirect'; location: string } {
  return {
    kind: 'redirect',
    location: redirectTo(request.redirectUri, {
      error,
      error_description: description,
      state: request.state,
    }),
  };
}

const single = (q: Query, key: string): string | undefined | null => {
  const v = q[key];
  if (Array.isArray(v)) return null; // RFC 6749 §3.1: parameters must not be repeated
  return v === '' ? undefined : v;
};

interface ClientInfo {
  name: string;
  redirectUris: string[];
}

async function activeClient(deps: Pick<AuthDeps, 'db'>, clientId: string): Promise<ClientInfo | undefined> {
  const row = CLIENT_ID.test(clientId)
    ? await selectCurrent(deps.db, 'ClientApplication', clientId)
    : undefined;
  if (!row || row.deleted) return undefined;
  const c = JSON.parse(row.json) as {
    status?: unknown;
    name?: unknown;
    redirectUri?: unknown;
    redirectUris?: unknown;
  };
  if (c.status !== undefined && c.status !== 'active') return undefined;
  const uris = [c.redirectUri, ...(Array.isArray(c.redirectUris) ? c.redirectUris : [])];
  return {
    name: typeof c.name === 'string' ? c.name : clientId,
    redirectUris: [...new Set(uris.filter((u): u is string => typeof u === 'string' && u !== ''))],
  };
}

/** The client and redirect URI, or the error to show (never redirected: the redirect URI is not trusted yet). */
async function trustedTarget(
  deps: Pick<AuthDeps, 'db'>,
  q: Query,
): Promise<
  | { kind: 'show'; message: string }
  | { kind: 'ok'; client: ClientInfo; clientId: string; redirectUri: string; sent: boolean }
> {
  const clientId = single(q, 'client_id');
  if (clientId === null) return { kind: 'show', message: 'client_id must be given once.' };
  if (clientId === undefined)
    return { kind: 'show', message: 'The request names no application (client_id).' };
  const client = await activeClient(deps, clientId);
  if (!client) return { kind: 'show', message: 'The application (client_id) is unknown or not active.' };
  const asked = single(q, 'redirect_uri');
  if (asked === null) return { kind: 'show', message: 'redirect_uri must be given once.' };
  const redirectUri = asked ?? (client.redirectUris.length === 1 ? client.redirectUris[0] : undefined);
  // Exact string comparison (RFC 6749 §3.1.2.3; OAuth 2.0 Security BCP §4.1.3): no prefix or pattern matching.
  if (redirectUri === undefined || !client.redirectUris.includes(redirectUri)) {
    return { kind: 'show', message: 'The redirect_uri is not registered for this application.' };
  }
  if (!URL.canParse(redirectUri) || redirectUri.includes('#')) {
    return {
      kind: 'show',
      message: 'The registered redirect_uri is not an absolute URI without a fragment.',
    };
  }
  return { kind: 'ok', client, clientId, redirectUri, sent: asked !== undefined };
}

/** Checks an authorization request; `fhirBase` is the `aud` it must name (SMART App Launch: `aud` required). */
export async function checkAuthorizeRequest(
  deps: Pick<AuthDeps, 'db' | 'clock'>,
  q: Query,
  fhirBase: string,
): Promise<AuthorizeCheck> {
  const target = await trustedTarget(deps, q);
  if (target.kind === 'show') return target;
  const state = single(q, 'state');
  const back = { redirectUri: target.redirectUri, ...(typeof state === 'string' ? { state } : {}) };
  const fail = (error: OAuthErrorCode, description: string) => errorRedirect(back, error, description);
  const names = ['response_type', 'scope', 'aud', 'code_challenge', 'code_challenge_method', 'nonce'];
  const v = Object.fromEntries(names.map((n) => [n, single(q, n)]));
  const repeated = [...names, 'state'].find((n) => single(q, n) === null);
  if (repeated) return fail('invalid_request', `${repeated} must be given once`);
  if (v.response_type === undefined) return fail('invalid_request', 'response_type is required');
  if (v.response_type !== 'code')
    return fail('unsupported_response_type', 'Only response_type=code is supported');
  if (typeof state !== 'string') return fail('invalid_request', 'state is required');
  if (state.length > 1024 || (v.nonce?.length ?? 0) > 512 || (v.scope?.length ?? 0) > 2048) {
    return fail('invalid_request', 'state, nonce or scope is too long');
  }
  const aud = v.aud?.replace(/\/$/, '');
  if (aud !== fhirBase.replace(/\/$/, ''))
    return fail('invalid_request', `aud must be the FHIR base ${fhirBase}`);
  if (v.code_challenge_method !== 'S256') {
    return fail(
      'invalid_request',
      'code_challenge_method must be S256 (PKCE is required; plain is not accepted)',
    );
  }
  if (!v.code_challenge || !S256_CHALLENGE.test(v.code_challenge)) {
    return fail('invalid_request', 'code_challenge must be the base64url SHA-256 of the code verifier');
  }
  if (!v.scope || v.scope.trim() === '') return fail('invalid_scope', 'scope is required');
  // SMART EHR launch (API.md §11): the launch must be this client's, unused and unexpired; used up at code issue.
  const launch = single(q, 'launch');
  if (launch === null) return fail('invalid_request', 'launch must be given once');
  let hash: string | undefined;
  if (launch !== undefined) {
    if (!v.scope.split(/\s+/).includes('launch'))
      return fail('invalid_request', 'The launch parameter needs the scope launch');
    hash = launchHash(launch);
    if (launch.length > 512 || !(await findLaunch(deps.db, deps, hash, target.clientId))) {
      return fail(
        'invalid_request',
        'The launch is unknown, expired, already used or not for this application',
      );
    }
  }
  const request: AuthorizeRequest = {
    clientId: target.clientId,
    redirectUri: target.redirectUri,
    redirectUriSent: target.sent,
    state,
    scope: v.scope,
    codeChallenge: v.code_challenge,
    ...(v.nonce ? { nonce: v.nonce } : {}),
    ...(hash !== undefined ? { launchHash: hash } : {}),
  };
  return { kind: 'ok', request, clientName: target.client.name };
}

/** A pending request as stored: `userId` once the password was right (the membership is still to be chosen). */
export interface PendingAuthorization extends AuthorizeRequest {
  idHash: string;
  clientName: string;
  userId?: string;
  /** The membership chosen, while its user picks the patient of a standalone `launch/patient` (patient-picker.ts). */
  membershipId?: string;
}

/** Stores a checked request; answers the transaction id (for the form) and a new browser secret (for a cookie). */
export async function startTransaction(
  db: Queryable,
  deps: Pick<AuthDeps, 'clock'>,
  r: AuthorizeRequest & { clientName: string },
): Promise<{ id: string; browser: string }> {
  const id = generateSecret();
  const browser = generateSecret();
  const now = deps.clock().getTime();
  await db.query('DELETE FROM authorize_requests WHERE expires_at < $1', [new Date(now - 3600_000)]);
  await db.query(
    `INSERT INTO authorize_requests (id_hash, browser_hash, client_id, client_name, redirect_uri, redirect_uri_sent,
       state, scope, code_challenge, nonce, expires_at, launch_hash)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
    [
      sha256(id),
      sha256(browser),
      r.clientId,
      r.clientName.slice(0, 200),
      r.redirectUri,
      r.redirectUriSent,
      r.state ?? null,
      r.scope,
      r.codeChallenge,
      r.nonce ?? null,
      new Date(now + AUTHORIZE_LIFETIME * 1000),
      r.launchHash ?? null,
    ],
  );
  return { id, browser };
}

interface PendingRow {
  id_hash: string;
  client_id: string;
  client_name: string;
  redirect_uri: string;
  redirect_uri_sent: boolean;
  state: string | null;
  scope: string;
  code_challenge: string;
  nonce: string | null;
  user_id: string | null;
  launch_hash: string | null;
  membership_id: string | null;
}

/**
 * The pending request of a form post, when the transaction id is known, unused, unexpired and was started by this
 * browser (the cookie): a form posted from another site or another browser finds nothing (the CSRF guard).
 */
export async function loadTransaction(
  db: Queryable,
  deps: Pick<AuthDeps, 'clock'>,
  id: string | undefined,
  browser: string | undefined,
): Promise<PendingAuthorization | undefined> {
  if (!id || !browser) return undefined;
  const r = await db.query<PendingRow>(
    `SELECT ${PENDING_COLUMNS} FROM authorize_requests
     WHERE id_hash = $1 AND browser_hash = $2 AND used_at IS NULL AND expires_at > $3`,
    [sha256(id), sha256(browser), deps.clock()],
  );
  const row = r.rows[0];
  return row ? pendingOf(row) : undefined;
}

/**
 * The pending request an identity provider's callback names by the `state` Cinder sent it (upstream-sign-in.ts), with
 * the same conditions as loadTransaction: `browser(idHash)` answers the cookie this browser holds for that request.
 * The upstream PKCE verifier comes with it.
 */
export async function loadUpstreamTransaction(
  db: Queryable,
  deps: Pick<AuthDeps, 'clock'>,
  state: string | undefined,
  browser: (idHash: string) => string | undefined,
): Promise<(PendingAuthorization & { upstreamVerifier: string }) | undefined> {
  if (!state) return undefined;
  const r = await db.query<PendingRow & { browser_hash: string; upstream_verifier: string }>(
    `SELECT ${PENDING_COLUMNS}, browser_hash, upstream_verifier FROM authorize_requests
     WHERE upstream_state_hash = $1 AND used_at IS NULL AND expires_at > $2`,
    [sha256(state), deps.clock()],
  );
  const row = r.rows[0];
  const cookie = row ? browser(row.id_hash) : undefined;
  if (!row || !cookie || sha256(cookie) !== row.browser_hash) return undefined;
  return { ...pendingOf(row), upstreamVerifier: row.upstream_verifier };
}

/** Records the state and PKCE verifier of the request sent to the identity provider (a new one replaces it). */
export async function setUpstream(
  db: Queryable,
  p: PendingAuthorization,
  state: string,
  verifier: string,
): Promise<void> {
  await db.query(
    'UPDATE authorize_requests SET upstream_state_hash = $2, upstream_verifier = $3 WHERE id_hash = $1',
    [p.idHash, sha256(state), verifier],
  );
}

const PENDING_COLUMNS =
  'id_hash, client_id, client_name, redirect_uri, redirect_uri_sent, state, scope, code_challenge, nonce, user_id, ' +
  'launch_hash, membership_id';

function pendingOf(row: PendingRow): PendingAuthorization {
  return {
    idHash: row.id_hash,
    clientId: row.client_id,
    clientName: row.client_name,
    redirectUri: row.redirect_uri,
    redirectUriSent: row.redirect_uri_sent,
    ...(row.state !== null ? { state: row.state } : {}),
    scope: row.scope,
    codeChallenge: row.code_challenge,
    ...(row.nonce !== null ? { nonce: row.nonce } : {}),
    ...(row.user_id !== null ? { userId: row.user_id } : {}),
    ...(row.launch_hash !== null ? { launchHash: row.launch_hash } : {}),
    ...(row.membership_id !== null ? { membershipId: row.membership_id } : {}),
  };
}

/** Records who signed in, for the membership choice that follows. */
export async function setTransactionUser(
  db: Queryable,
  p: PendingAuthorization,
  userId: string,
): Promise<void> {
  await db.query('UPDATE authorize_requests SET user_id = $2 WHERE id_hash = $1', [p.idHash, userId]);
}

/** Records the membership whose user now picks a patient (standalone `launch/patient`, patient-picker.ts). */
export async function setTransactionMembership(
  db: Queryable,
  p: PendingAuthorization,
  userId: string,
  membershipId: string,
): Promise<void> {
  await db.query('UPDATE authorize_requests SET user_id = $2, membership_id = $3 WHERE id_hash = $1', [
    p.idHash,
    userId,
    membershipId,
  ]);
}

/** Uses the transaction up; false when another request already did (a double submit). */
export async function endTransaction(
  db: Queryable,
  deps: Pick<AuthDeps, 'clock'>,
  p: PendingAuthorization,
): Promise<boolean> {
  const r = await db.query(
    'UPDATE authorize_requests SET used_at = $2 WHERE id_hash = $1 AND used_at IS NULL',
    [p.idHash, deps.clock()],
  );
  return r.rowCount > 0;
}
