// A minimal browser for the authorize endpoint's pages through app.inject: keeps the cookie, reads the hidden
// transaction field and the chooser's options, posts forms, and reads redirects.
import { createHash, randomBytes } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';

export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(48).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** The query parameters of a redirect's Location. */
export function redirectParams(res: LightMyRequestResponse): URLSearchParams {
  const location = res.headers.location;
  if (typeof location !== 'string')
    throw new Error(`no redirect: ${res.statusCode} ${res.body.slice(0, 400)}`);
  return new URL(location).searchParams;
}

const unescape = (s: string): string =>
  s.replace(/&#(\d+);/g, (_m, n: string) => String.fromCharCode(Number(n))).replace(/&amp;/g, '&');

export class Browser {
  readonly cookies = new Map<string, string>();
  constructor(private readonly app: FastifyInstance) {}

  private get cookie(): string | undefined {
    return this.cookies.size ? [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ') : undefined;
  }

  async get(url: string): Promise<LightMyRequestResponse> {
    const res = await this.app.inject({
      method: 'GET',
      url,
      headers: this.cookie ? { cookie: this.cookie } : {},
    });
    const set = res.headers['set-cookie'];
    for (const c of Array.isArray(set) ? set : set ? [set] : []) {
      const [k, v] = (c.split(';')[0] as string).split('=', 2) as [string, string];
      this.cookies.set(k, v);
    }
    return res;
  }

  post(url: string, fields: Record<string, string>): Promise<LightMyRequestResponse> {
    return this.app.inject({
      method: 'POST',
      url,
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        ...(this.cookie ? { cookie: this.cookie } : {}),
      },
      payload: new URLSearchParams(fields).toString(),
    });
  }
}

/** The hidden transaction id of a sign-in or chooser page. */
export function transactionOf(res: LightMyRequestResponse): string {
  const m = /name="transaction" value="([^"]+)"/.exec(res.body);
  if (!m) throw new Error(`no form: ${res.statusCode} ${res.body.slice(0, 400)}`);
  return unescape(m[1] as string);
}

/** The form's action, as a path for app.inject. */
export function actionOf(res: LightMyRequestResponse): string {
  const m = /<form method="post" action="([^"]+)"/.exec(res.body);
  if (!m) throw new Error('no form action');
  return new URL(unescape(m[1] as string)).pathname;
}

/** The chooser's options: membership id and label. */
export function optionsOf(res: LightMyRequestResponse): { id: string; label: string }[] {
  return [...res.body.matchAll(/name="membership" value="([^"]+)"[^>]*> ([^<]+)<\/label>/g)].map((m) => ({
    id: unescape(m[1] as string),
    label: unescape(m[2] as string),
  }));
}

/**
 * A whole standalone launch through app.inject: the authorize URL with PKCE, the sign-in form, the code exchange.
 * Answers the token response (expects each step to succeed; a chooser page is not handled).
 */
export async function smartLaunch(
  app: FastifyInstance,
  o: { clientId: string; redirectUri: string; aud: string; email: string; password: string; scope: string },
): Promise<Record<string, string>> {
  const browser = new Browser(app);
  const p = pkce();
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: o.clientId,
    redirect_uri: o.redirectUri,
    scope: o.scope,
    state: 'launch-state',
    aud: o.aud,
    code_challenge: p.challenge,
    code_challenge_method: 'S256',
  });
  const page = await browser.get(`/oauth2/authorize?${q.toString()}`);
  if (page.statusCode !== 200) throw new Error(`authorize: ${page.statusCode} ${page.body.slice(0, 400)}`);
  const signedIn = await browser.post(actionOf(page), {
    transaction: transactionOf(page),
    email: o.email,
    password: o.password,
  });
  const code = redirectParams(signedIn).get('code');
  if (!code) throw new Error(`no code: ${signedIn.headers.location as string}`);
  const token = await app.inject({
    method: 'POST',
    url: '/oauth2/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      code_verifier: p.verifier,
      client_id: o.clientId,
      redirect_uri: o.redirectUri,
    }).toString(),
  });
  if (token.statusCode !== 200) throw new Error(`token: ${token.statusCode} ${token.body}`);
  return token.json() as Record<string, string>;
}
