// The service's own access tokens: JWTs signed with the persisted key ring (RFC 9068 claims plus the ones
// MedplumClient reads: login_id, profile, client_id). https://www.rfc-editor.org/rfc/rfc9068
import { decodeProtectedHeader, errors, jwtVerify, SignJWT } from 'jose';
import { LRUCache } from 'lru-cache';
import type { KeyRing } from './keys.js';
import { SIGNING_ALG } from './keys.js';

export interface AccessClaims {
  sub: string;
  login_id: string;
  profile: string;
  scope: string;
  client_id?: string;
}

export interface VerifiedAccessToken extends AccessClaims {
  exp: number;
  iat: number;
}

export class InvalidTokenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidTokenError';
  }
}

export interface TokenIssuer {
  issuer: string;
  sign(claims: AccessClaims, lifetimeSeconds: number, nowSeconds: number): Promise<string>;
  verify(token: string, nowSeconds: number): Promise<VerifiedAccessToken>;
  /** True when the token's header names one of our keys (so it is ours, not an external provider's). */
  isOwn(token: string): boolean;
}

export function createTokenIssuer(ring: KeyRing, issuer: string): TokenIssuer {
  // Signature checks cost ~0.25 ms each through WebCrypto; a verified token is remembered (in this process only)
  // until its exp, so each request after the first costs a map lookup. Expiry is still checked on every use.
  const verified = new LRUCache<string, VerifiedAccessToken>({ max: 20_000 });
  return {
    issuer,
    async sign(claims, lifetimeSeconds, nowSeconds) {
      return new SignJWT({ ...claims })
        .setProtectedHeader({ alg: SIGNING_ALG, kid: ring.current.kid, typ: 'at+jwt' })
        .setIssuer(issuer)
        .setIssuedAt(nowSeconds)
        .setExpirationTime(nowSeconds + lifetimeSeconds)
        .setJti(crypto.randomUUID())
        .sign(ring.current.privateKey);
    },
    async verify(token, nowSeconds) {
      const known = verified.get(token);
      if (known) {
        if (known.exp <= nowSeconds) throw new InvalidTokenError('Token expired');
        return known;
      }
      try {
        const { payload } = await jwtVerify(
          token,
          (header) => {
            const key = header.kid ? ring.publicKeys.get(header.kid) : undefined;
            if (!key) throw new InvalidTokenError('Unknown signing key');
            return key;
          },
          {
            issuer,
            algorithms: [SIGNING_ALG],
            currentDate: new Date(nowSeconds * 1000),
            requiredClaims: ['exp', 'sub'],
          },
        );
        if (typeof payload.login_id !== 'string' || typeof payload.profile !== 'string') {
          throw new InvalidTokenError('Token lacks login_id or profile');
        }
        const claims = payload as unknown as VerifiedAccessToken;
        verified.set(token, claims);
        return claims;
      } catch (err) {
        if (err instanceof InvalidTokenError) throw err;
        if (err instanceof errors.JWTExpired) throw new InvalidTokenError('Token expired');
        throw new InvalidTokenError('Invalid token');
      }
    },
    isOwn(token) {
      try {
        const h = decodeProtectedHeader(token);
        return typeof h.kid === 'string' && ring.publicKeys.has(h.kid);
      } catch {
        return false;
      }
    },
  };
}
