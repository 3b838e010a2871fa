// A mock external identity provider for the tests: its own RS256 key pair, JWTs with chosen claims, a userinfo
// endpoint that verifies the bearer token's signature and counts calls, and switches to misbehave.
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
  const idp = { calls: 0, mode: 'ok' } as MockIdp;
  const server = http.createServer((req, res) => {
    void (async () => {
      if (req.url === '/jwks') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
        return;
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
