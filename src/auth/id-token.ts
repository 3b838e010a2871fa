// OpenID Connect ID Tokens of the code and refresh flows, signed with the service's persisted key ring.
// https://openid.net/specs/openid-connect-core-1_0.html#IDToken
import { createHash } from 'node:crypto';
import { SignJWT } from 'jose';
import type { Db } from '../storage/db.js';
import { loadKeyRing, SIGNING_ALG, type KeyRing } from './keys.js';

/** `aud` of an ID Token whose login names no ClientApplication. */
export const DEFAULT_AUDIENCE = 'cinder';

export interface IdTokenInput {
  /** The User id. */
  sub: string;
  /** The ClientApplication id, or DEFAULT_AUDIENCE. */
  audience: string;
  /** When the user authenticated (seconds since the epoch). */
  authTime: number;
  nonce?: string;
  /** `<Type>/<id>` of the profile (SMART App Launch `fhirUser`). */
  fhirUser: string;
  /** The access token issued with it, for `at_hash` (OpenID Connect Core §3.1.3.6). */
  accessToken: string;
  lifetime: number;
  now: number;
}

export type IdTokenSigner = (input: IdTokenInput) => Promise<string>;

/** The key ring of the app when it is passed in, else the one persisted in the database (loaded once). */
export function keyRingSource(db: Db, keys?: KeyRing): () => Promise<KeyRing> {
  if (keys) return async () => keys;
  let ring: Promise<KeyRing> | undefined;
  return () => {
    ring ??= loadKeyRing(db).catch((err: unknown) => {
      ring = undefined;
      throw err;
    });
    return ring;
  };
}

function atHash(accessToken: string): string {
  const digest = createHash('sha256').update(accessToken, 'ascii').digest();
  return digest.subarray(0, digest.length / 2).toString('base64url');
}

export function createIdTokenSigner(issuer: string, keys: () => Promise<KeyRing>): IdTokenSigner {
  return async (input) => {
    const ring = await keys();
    // No login_id or profile claim: an ID Token is never accepted as an access token.
    return new SignJWT({
      auth_time: input.authTime,
      ...(input.nonce !== undefined ? { nonce: input.nonce } : {}),
      fhirUser: input.fhirUser,
      at_hash: atHash(input.accessToken),
    })
      .setProtectedHeader({ alg: SIGNING_ALG, kid: ring.current.kid, typ: 'JWT' })
      .setIssuer(issuer)
      .setSubject(input.sub)
      .setAudience(input.audience)
      .setIssuedAt(input.now)
      .setExpirationTime(input.now + input.lifetime)
      .sign(ring.current.privateKey);
  };
}
