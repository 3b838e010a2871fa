// The console's sign-in: the authorization code flow at {base}oauth2/authorize as a public client with PKCE S256
// (RFC 6749 §4.1, RFC 7636), the code exchange and refresh at {base}oauth2/token, and sign-out.
import { CONSOLE_CLIENT_ID, type Env } from './env.js';
import { errorMessage } from './outcome.js';
import { randomToken, s256Challenge } from './pkce.js';
import {
  clearPending,
  clearSession,
  loadPending,
  loadSession,
  saveSession,
  savePending,
  type Session,
} from './session.js';

/** No resource scopes: the token has its membership's rights; offline_access gives a refresh token. */
export const CONSOLE_SCOPE = 'openid offline_access';

export function authorizeUrl(env: Env, state: string, challenge: string): string {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: CONSOLE_CLIENT_ID,
    redirect_uri: env.consoleBase,
    scope: CONSOLE_SCOPE,
    state,
    aud: env.fhir,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  });
  return `${env.base}oauth2/authorize?${q.toString()}`;
}

/** Sends the browser to the sign-in page; `returnTo` is the console route to open afterwards. */
export async function startSignIn(env: Env, returnTo: string): Promise<void> {
  const state = randomToken();
  const verifier = randomToken();
  savePending({ state, verifier, returnTo });
  location.assign(authorizeUrl(env, state, await s256Challenge(verifier)));
}

interface TokenAnswer {
  access_token: string;
  refresh_token?: string;
  expires_in?: number;
}

async function tokenRequest(env: Env, form: Record<string, string>): Promise<Session> {
  let res: Response;
  try {
    res = await fetch(`${env.base}oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(form).toString(),
    });
  } catch {
    throw new Error(errorMessage(0, undefined));
  }
  const body = (await res.json().catch(() => undefined)) as TokenAnswer | undefined;
  if (!res.ok || !body?.access_token) throw new Error(errorMessage(res.status, body));
  const session: Session = {
    accessToken: body.access_token,
    ...(body.refresh_token ? { refreshToken: body.refresh_token } : {}),
    expiresAt: Date.now() + (body.expires_in ?? 3600) * 1000,
  };
  saveSession(session);
  return session;
}

/**
 * The redirect back from the sign-in page: `?code&state` (exchanged once, with the verifier kept for this state) or
 * `?error&error_description`. Answers the route to open, or throws the reason the sign-in failed.
 */
export async function completeSignIn(env: Env, params: URLSearchParams): Promise<string> {
  const pending = loadPending();
  clearPending();
  const error = params.get('error');
  if (error) throw new Error(`Sign-in failed: ${params.get('error_description') ?? error}`);
  const code = params.get('code');
  if (!pending || !code || params.get('state') !== pending.state) {
    throw new Error(
      'Sign-in failed: this answer does not belong to a sign-in started in this tab. Sign in again.',
    );
  }
  await tokenRequest(env, {
    grant_type: 'authorization_code',
    code,
    code_verifier: pending.verifier,
    client_id: CONSOLE_CLIENT_ID,
    redirect_uri: env.consoleBase,
  });
  return pending.returnTo;
}

/** A new access token from the refresh token (rotated: the answer's refresh token replaces the old one). */
export async function refresh(env: Env): Promise<Session | undefined> {
  const s = loadSession();
  if (!s?.refreshToken) return undefined;
  try {
    return await tokenRequest(env, {
      grant_type: 'refresh_token',
      refresh_token: s.refreshToken,
      client_id: CONSOLE_CLIENT_ID,
    });
  } catch {
    return undefined;
  }
}

/** Ends the login on the server (its tokens stop working) and forgets it here. */
export async function signOut(env: Env): Promise<void> {
  const s = loadSession();
  clearSession();
  if (s) {
    await fetch(`${env.base}auth/logout`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.accessToken}` },
    }).catch(() => undefined);
  }
}
