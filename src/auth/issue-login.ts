// Creates a login for a membership and the token response of RFC 6749 §5.1 plus Cinder's project/profile.
import { nowSeconds, type AuthDeps } from './deps.js';
import { OAuthError } from './oauth-error.js';
import { createLogin, loginWouldHold, type NewLogin } from './principal.js';
import type { FhirContextItem } from './smart-launch.js';

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
  project: { reference: string };
  profile: { reference: string };
  refresh_token?: string;
  id_token?: string;
  /** SMART App Launch launch context: the id of the Patient in context (`launch/patient`). */
  patient?: string;
  /** The id of the Encounter in context (EHR launch, `launch` or `launch/encounter`). */
  encounter?: string;
  /** The further resources in context (EHR launch, `launch`): SMART 2.x `fhirContext`. */
  fhirContext?: FhirContextItem[];
  /** RFC 8693 §2.2.1, token exchange only. */
  issued_token_type?: string;
}

/** What an access token is signed for: an existing login. */
export interface LoginRef {
  id: string;
  projectId: string;
  profile: string;
  clientId?: string;
}

export interface IssueOptions {
  sub: string;
  scope?: string;
  /** The token never lives past this time (seconds since the epoch), e.g. an exchanged token's `exp`. */
  notAfter?: number;
}

export async function issueLogin(
  deps: AuthDeps,
  login: Omit<NewLogin, 'id'>,
  opts: IssueOptions = { sub: '' },
): Promise<TokenResponse> {
  const id = deps.newId();
  const now = deps.clock();
  // Every grant picks its membership with the login rules already; this guards any that does not (the same rules as
  // loadPrincipal), so no token response ever names a profile of another project or a deactivated client or user.
  if (!(await loginWouldHold(deps.db, { ...login, id }, now))) {
    throw new OAuthError(
      login.authMethod === 'client_credentials' ? 'invalid_client' : 'invalid_grant',
      'The project membership cannot be logged in through',
    );
  }
  await createLogin(deps.db, { ...login, id }, now);
  return accessTokenResponse(deps, { ...login, id }, opts);
}

/** A new access token for an existing login (e.g. after a code exchange or a refresh). */
export async function accessTokenResponse(
  deps: AuthDeps,
  login: LoginRef,
  opts: IssueOptions,
): Promise<TokenResponse> {
  const now = nowSeconds(deps);
  const lifetime = Math.max(
    1,
    Math.min(deps.accessTokenLifetime, opts.notAfter !== undefined ? opts.notAfter - now : Infinity),
  );
  const scope = opts.scope ?? 'openid';
  const token = await deps.tokens.sign(
    {
      sub: opts.sub,
      login_id: login.id,
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
