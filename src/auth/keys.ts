// Signing keys for the service's own tokens, persisted in the database so that every instance signs and
// verifies with the same keys and tokens survive a restart. Published at /.well-known/jwks.json.
import { exportJWK, generateKeyPair, importJWK, type JWK, type CryptoKey } from 'jose';
import { randomUUID } from 'node:crypto';
import type { Db } from '../storage/db.js';

export const SIGNING_ALG = 'RS256';

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export interface KeyRing {
  /** The key new tokens are signed with: the oldest one, so concurrently started instances agree. */
  current: SigningKey;
  /** Public keys by kid, for verification. */
  publicKeys: Map<string, CryptoKey>;
  jwks: { keys: JWK[] };
}

interface KeyRow {
  kid: string;
  private_jwk: JWK;
  public_jwk: JWK;
}

async function generate(db: Db): Promise<void> {
  const { privateKey, publicKey } = await generateKeyPair(SIGNING_ALG, { extractable: true });
  const kid = randomUUID();
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: SIGNING_ALG, use: 'sig' };
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: SIGNING_ALG };
  await db.query(
    'INSERT INTO signing_keys (kid, alg, private_jwk, public_jwk) VALUES ($1, $2, $3::jsonb, $4::jsonb)',
    [kid, SIGNING_ALG, JSON.stringify(privateJwk), JSON.stringify(publicJwk)],
  );
}

/** Loads the key ring, creating the first key when the database has none. */
export async function loadKeyRing(db: Db): Promise<KeyRing> {
  const select = (): Promise<{ rows: KeyRow[] }> =>
    db.query<KeyRow>('SELECT kid, private_jwk, public_jwk FROM signing_keys ORDER BY created_at, kid');
  let rows = (await select()).rows;
  if (rows.length === 0) {
    await generate(db);
    rows = (await select()).rows;
  }
  const first = rows[0] as KeyRow;
  const publicKeys = new Map<string, CryptoKey>();
  for (const r of rows) publicKeys.set(r.kid, (await importJWK(r.public_jwk, SIGNING_ALG)) as CryptoKey);
  return {
    current: {
      kid: first.kid,
      privateKey: (await importJWK(first.private_jwk, SIGNING_ALG)) as CryptoKey,
      publicJwk: first.public_jwk,
    },
    publicKeys,
    jwks: { keys: rows.map((r) => r.public_jwk) },
  };
}
