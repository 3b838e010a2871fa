// Creates a login for a membership and the token response of RFC 6749 §5.1 plus Cinder's project/profile.
import { createLogin, type NewLogin } from './principal.js';
import { nowSeconds, type AuthDeps } from './deps.js';

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
  project: { reference: string };
  profile: { reference: string };
  refresh_token?: string;
  id_token?: string;
}

export async function issueLogin(
  deps: AuthDeps,
  login: Omit<NewLogin, 'id'>,
  opts: { sub: string; scope?: string; notAfter?: number } = { sub: '' },
): Promise<TokenResponse> {
  const id = deps.newId();
  await createLogin(deps.db, { ...login, id });
  const now = nowSeconds(deps);
  const lifetime = Math.max(
    1,
    Math.min(deps.accessTokenLifetime, opts.notAfter !== undefined ? opts.notAfter - now : Infinity),
  );
  const scope = opts.scope ?? 'openid';
  const token = await deps.tokens.sign(
    {
      sub: opts.sub,
      login_id: id,
      profile: login.profile,
      scope,
      ...(login.clientId ? { client_id: login.clientId } : {}),
    },
    lifetime,
    now,
  );
  return {
    access_token: token,
    token_type: 'Bearer',
    expires_in: lifetime,
    scope,
    project: { reference: `Project/${login.projectId}` },
    profile: { reference: login.profile },
  };
}
