// "Sign in with <provider>" at the authorize endpoint: the browser goes to the ClientApplication's identity provider
// (its `identityProvider.authorizeUrl`; OpenID Connect Core §3.1 code flow, https://openid.net/specs/openid-connect-core-1_0.html,
// with PKCE, RFC 7636), comes back to `{base}oauth2/authorize/callback`, the code is exchanged at `tokenUrl`, the user
// is found through `userInfoUrl` as the token exchange finds them (token-exchange.ts: email, or `sub` as externalId
// with useSubject), and the sign-in then goes on as a password sign-in does (a code for the app, or the chooser).
// Both URLs the server fetches are a tenant's choice: they go through the outbound rule. Every failure after the app's
// redirect URI is trusted goes back to the app as one `access_denied`; its cause goes to the log only.
import { createHash } from 'node:crypto';
import { generateSecret, readIdpClientSecret } from '../fhir/repository/secrets.js';
import { selectCurrent } from '../fhir/repository/store.js';
import { issueCode, type AuthorizeStep } from './authorize-login.js';
import {
  endTransaction,
  errorRedirect,
  loadUpstreamTransaction,
  setUpstream,
  type PendingAuthorization,
} from './authorize-request.js';
import type { AuthDeps } from './deps.js';
import type { ExternalAuthLogger } from './external/validate-external-token.js';
import { outboundRequest, OutboundError, type Resolver } from './outbound.js';
import { activeMembershipsOfUser } from './principal.js';
import { ExchangeFailure, identify, identityProviderOf } from './token-exchange.js';

/** An identity provider a ClientApplication names with everything the browser flow needs. */
export interface UpstreamProvider {
  authorizeUrl: string;
  tokenUrl: string;
  userInfoUrl: string;
  clientId: string;
  useSubject: boolean;
  /** What the button says: the provider's host. */
  label: string;
}

const httpUrl = (v: unknown): v is string => {
  if (typeof v !== 'string' || !URL.canParse(v)) return false;
  const { protocol } = new URL(v);
  return protocol === 'https:' || protocol === 'http:';
};

/** The client's identity provider for the browser flow, or undefined when it lacks a URL or its client id. */
export function upstreamProviderOf(client: Record<string, unknown>): UpstreamProvider | undefined {
  const idp = client.identityProvider as Record<string, unknown> | undefined;
  const base = identityProviderOf(client);
  if (!base || !idp || !httpUrl(idp.authorizeUrl) || !httpUrl(idp.tokenUrl)) return undefined;
  if (typeof idp.clientId !== 'string' || idp.clientId === '') return undefined;
  return {
    authorizeUrl: idp.authorizeUrl,
    tokenUrl: idp.tokenUrl,
    userInfoUrl: base.userInfoUrl,
    clientId: idp.clientId,
    useSubject: base.useSubject,
    label: new URL(idp.authorizeUrl).host,
  };
}

/** The identity provider of a live ClientApplication, with the client's project (where its users are found). */
async function clientProvider(
  deps: Pick<AuthDeps, 'db'>,
  clientId: string,
): Promise<{ provider: UpstreamProvider; projectId: string } | undefined> {
  const row = await selectCurrent(deps.db, 'ClientApplication', clientId);
  const provider =
    row && !row.deleted ? upstreamProviderOf(JSON.parse(row.json) as Record<string, unknown>) : undefined;
  return row && provider ? { provider, projectId: row.project_id } : undefined;
}

/** The identity provider of a live ClientApplication, for the sign-in page's button. */
export async function upstreamProvider(
  deps: Pick<AuthDeps, 'db'>,
  clientId: string,
): Promise<UpstreamProvider | undefined> {
  return (await clientProvider(deps, clientId))?.provider;
}

/** The button was pressed: the browser goes to the provider, with a fresh state and PKCE challenge. */
export async function startUpstream(
  deps: AuthDeps,
  p: PendingAuthorization,
  callbackUrl: string,
): Promise<AuthorizeStep> {
  const provider = await upstreamProvider(deps, p.clientId);
  if (!provider)
    return { kind: 'show', message: 'This application has no identity provider to sign in with.' };
  const state = generateSecret();
  const verifier = generateSecret();
  await setUpstream(deps.db, p, state, verifier);
  const url = new URL(provider.authorizeUrl);
  const params = {
    response_type: 'code',
    client_id: provider.clientId,
    redirect_uri: callbackUrl,
    scope: 'openid email profile',
    state,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
  };
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return { kind: 'redirect', location: url.toString() };
}

export interface UpstreamOptions {
  log: ExternalAuthLogger;
  timeoutMs?: number;
  resolve?: Resolver;
}

const failed = (reason: string, detail?: Record<string, unknown>) => new ExchangeFailure(reason, detail);

/** The provider's access token for the code (RFC 6749 §4.1.3, client_secret_post when a secret is stored). */
async function redeemCode(
  deps: AuthDeps,
  provider: UpstreamProvider,
  p: PendingAuthorization & { upstreamVerifier: string },
  code: string,
  callbackUrl: string,
  opts: UpstreamOptions,
): Promise<string> {
  const secret = await readIdpClientSecret(deps.db, p.clientId);
  const form = new URLSearchParams({
    grant_type: 'authorization_code',
    code,
    redirect_uri: callbackUrl,
    client_id: provider.clientId,
    code_verifier: p.upstreamVerifier,
    ...(secret !== undefined ? { client_secret: secret } : {}),
  });
  let res;
  try {
    res = await outboundRequest(
      provider.tokenUrl,
      { allowedHosts: deps.allowedOutboundHosts ?? [], ...(opts.resolve ? { resolve: opts.resolve } : {}) },
      {
        method: 'POST',
        body: form.toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        timeoutMs: opts.timeoutMs ?? 5000,
      },
    );
  } catch (err) {
    if (err instanceof OutboundError)
      throw failed(`token endpoint ${err.reason}`, err.code ? { code: err.code } : {});
    throw err;
  }
  if (res.status < 200 || res.status > 299)
    throw failed('token endpoint answered non-2xx', { status: res.status });
  let token: unknown;
  try {
    token = (JSON.parse(res.body) as { access_token?: unknown }).access_token;
  } catch {
    token = undefined;
  }
  if (typeof token !== 'string' || token === '') throw failed('token endpoint answered no access_token');
  return token;
}

/**
 * The provider's callback (`code` and `state`, or `error`): the pending request it belongs to (this browser's only),
 * then the user behind the code, then a code for the app or the chooser. Unknown state or another browser: a page.
 */
export async function finishUpstream(
  deps: AuthDeps,
  q: { state?: string; code?: string; error?: string },
  browser: (idHash: string) => string | undefined,
  callbackUrl: string,
  opts: UpstreamOptions,
): Promise<AuthorizeStep> {
  const p = await loadUpstreamTransaction(deps.db, deps, q.state, browser);
  if (!p) return { kind: 'show', message: 'This sign-in has expired or was not started in this browser.' };
  const deny = async (reason: string, detail: Record<string, unknown> = {}): Promise<AuthorizeStep> => {
    opts.log.warn(
      { clientId: p.clientId, reason, ...detail },
      'Sign-in through the identity provider failed',
    );
    await endTransaction(deps.db, deps, p);
    return errorRedirect(p, 'access_denied', 'Signing in through the identity provider failed');
  };
  const client = await clientProvider(deps, p.clientId);
  if (!client) return deny('the client has no identity provider any more');
  if (q.error !== undefined || !q.code)
    return deny('the provider answered no code', { error: q.error?.slice(0, 64) });
  const { provider, projectId } = client;
  try {
    const token = await redeemCode(deps, provider, p, q.code, callbackUrl, opts);
    const { m } = await identify(deps, projectId, provider, token, opts);
    const userRef = m.user_ref ?? '';
    const usable = (await activeMembershipsOfUser(deps.db, userRef, projectId)).find((x) => x.id === m.id);
    if (!userRef.startsWith('User/') || !usable) throw failed('the membership cannot be logged in through');
    return await issueCode(deps, p, userRef.slice('User/'.length), usable, { noPicker: true });
  } catch (err) {
    if (!(err instanceof ExchangeFailure)) throw err;
    return deny(err.reason, { host: new URL(provider.tokenUrl).host, ...err.detail });
  }
}
