// A mock external identity provider for the tests: its own RS256 key pair, JWTs with chosen claims, a userinfo
// endpoint that verifies the bearer token's signature and counts calls, and switches to misbehave.
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, jwtVerify, SignJWT, type CryptoKey, type JWTPayload } from 'jose';

export interface MockIdp {
  issuer: string;
  userInfoUrl: string;
  jwksUrl: string;
  /** userinfo calls so far. */
  calls: number;
  /** 'ok' answers 200 with the token's claims; 'reject' 401; 'hang' never answers; 'other-sub' a different sub. */
  mode: 'ok' | 'reject' | 'hang' | 'other-sub';
  /**
   * The browser code flow (OpenID Connect Core §3.1): `/authorize` signs in whoever `signInAs` names at once and
   * redirects back with a code (or `error=access_denied` when signInAs is undefined); `/token` redeems a code once for
   * an access token of those claims, checking client_id, client_secret (when `clientSecret` is set), redirect_uri and
   * the PKCE verifier.
   */
  authorizeUrl: string;
  tokenUrl: string;
  signInAs?: Record<string, unknown>;
  clientId: string;
  clientSecret?: string;
  /** Form fields of each token request received. */
  tokenRequests: Record<string, string>[];
  token(
    claims: Omit<JWTPayload, 'exp'> & { exp?: number | null },
    opts?: { lifetime?: number; now?: number },
  ): Promise<string>;
  close(): Promise<void>;
}

export async function startMockIdp(): Promise<MockIdp> {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'idp-key', alg: 'RS256', use: 'sig' };
  const hanging: http.ServerResponse[] = [];
  const idp = {
    calls: 0,
    mode: 'ok',
    clientId: 'cinder-rp',
    tokenRequests: [] as Record<string, string>[],
  } as MockIdp;
  const codes = new Map<
    string,
    { claims: Record<string, unknown>; challenge: string; redirectUri: string }
  >();
  const json = (res: http.ServerResponse, status: number, body: unknown): void =>
    void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  const server = http.createServer((req, res) => {
    void (async () => {
      if (req.url === '/jwks') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
        return;
      }
      if (req.url?.startsWith('/authorize?')) {
        const q = new URL(req.url, 'http://idp').searchParams;
        const back = new URL(q.get('redirect_uri') ?? '');
        back.searchParams.set('state', q.get('state') ?? '');
        if (!idp.signInAs || q.get('client_id') !== idp.clientId)
          back.searchParams.set('error', 'access_denied');
        else {
          const code = crypto.randomUUID();
          codes.set(code, {
            claims: idp.signInAs,
            challenge: q.get('code_challenge') ?? '',
            redirectUri: q.get('redirect_uri') ?? '',
          });
          back.searchParams.set('code', code);
        }
        return void res.writeHead(302, { location: back.toString() }).end();
      }
      if (req.url === '/token' && req.method === 'POST') {
        let text = '';
        for await (const chunk of req) text += String(chunk);
        const f = Object.fromEntries(new URLSearchParams(text));
        idp.tokenRequests.push(f);
        const grant = codes.get(f.code ?? '');
        codes.delete(f.code ?? '');
        const verified =
          grant !== undefined &&
          f.client_id === idp.clientId &&
          (idp.clientSecret === undefined || f.client_secret === idp.clientSecret) &&
          f.redirect_uri === grant.redirectUri &&
          createHash('sha256')
            .update(f.code_verifier ?? '')
            .digest('base64url') === grant.challenge;
        if (!verified) return json(res, 400, { error: 'invalid_grant' });
        return json(res, 200, {
          access_token: await idp.token(grant.claims),
          token_type: 'Bearer',
          expires_in: 3600,
        });
      }
      if (req.url !== '/userinfo') return void res.writeHead(404).end();
      idp.calls++;
      if (idp.mode === 'hang') return void hanging.push(res);
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      let payload: JWTPayload | undefined;
      try {
        payload = token
          ? (await jwtVerify(token, publicKey as CryptoKey, { currentDate: new Date(0) })).payload
          : undefined;
      } catch {
        payload = undefined;
      }
      if (!payload || idp.mode === 'reject') return void res.writeHead(401).end('{"error":"invalid_token"}');
      const body = idp.mode === 'other-sub' ? { ...payload, sub: 'someone-else' } : payload;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    })();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  idp.issuer = base;
  idp.userInfoUrl = `${base}userinfo`;
  idp.authorizeUrl = `${base}authorize`;
  idp.tokenUrl = `${base}token`;
  idp.jwksUrl = `${base}jwks`;
  idp.token = async (claims, opts = {}) => {
    const now = opts.now ?? Math.floor(Date.now() / 1000);
    const { exp, ...rest } = claims;
    const jwt = new SignJWT({ iss: base, ...rest })
      .setProtectedHeader({ alg: 'RS256', kid: 'idp-key' })
      .setIssuedAt(now)
      .setJti(crypto.randomUUID());
    if (exp !== null) jwt.setExpirationTime(exp ?? now + (opts.lifetime ?? 7200));
    return jwt.sign(privateKey);
  };
  idp.close = async () => {
    hanging.forEach((r) => r.destroy());
    const closed = new Promise((r) => server.close(r));
    server.closeAllConnections(); // kept-alive client connections would hold close() for seconds
    await closed;
  };
  return idp;
}
