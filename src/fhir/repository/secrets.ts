// Secrets never live in resource content: they are hashed into the `credentials` table before a write,
// so no read, search, history or export can return them. (API.md §3; issue: secrets are never returned.)
import crypto from 'node:crypto';
import type { Queryable } from '../../storage/db.js';
import type { Resource } from '../types.js';

export interface ExtractedSecret {
  kind: 'client_secret' | 'password_hash';
  hash: string;
}

export function sha256(text: string): string {
  return crypto.createHash('sha256').update(text).digest('hex');
}

export function generateSecret(): string {
  return crypto.randomBytes(32).toString('base64url');
}

/**
 * Removes secret elements from a resource. For a new ClientApplication without a secret one is generated;
 * `revealed` is the plain secret to show once in the create response.
 */
export function extractSecrets(
  resource: Resource,
  isCreate: boolean,
): { resource: Resource; secrets: ExtractedSecret[]; revealed?: string } {
  if (resource.resourceType === 'ClientApplication') {
    const { secret, ...rest } = resource;
    let plain = typeof secret === 'string' && secret.length > 0 ? secret : undefined;
    let revealed: string | undefined;
    if (!plain && isCreate) {
      plain = generateSecret();
      revealed = plain;
    }
    return {
      resource: rest,
      secrets: plain ? [{ kind: 'client_secret', hash: sha256(plain) }] : [],
      revealed,
    };
  }
  if (resource.resourceType === 'User') {
    // Passwords are set only through the login service (bcrypt); a hash sent through FHIR is dropped.
    // eslint-disable-next-line @typescript-eslint/no-unused-vars
    const { passwordHash, password, ...rest } = resource;
    return { resource: rest, secrets: [] };
  }
  return { resource, secrets: [] };
}

export async function storeSecrets(
  tx: Queryable,
  resourceType: string,
  id: string,
  secrets: readonly ExtractedSecret[],
): Promise<void> {
  for (const s of secrets) {
    await tx.query(
      `INSERT INTO credentials (resource_type, id, kind, hash) VALUES ($1, $2, $3, $4)
       ON CONFLICT (resource_type, id, kind) DO UPDATE SET hash = EXCLUDED.hash, updated_at = now()`,
      [resourceType, id, s.kind, s.hash],
    );
  }
}

export async function readCredential(
  db: Queryable,
  resourceType: string,
  id: string,
  kind: ExtractedSecret['kind'],
): Promise<string | undefined> {
  const r = await db.query<{ hash: string }>(
    'SELECT hash FROM credentials WHERE resource_type = $1 AND id = $2 AND kind = $3',
    [resourceType, id, kind],
  );
  return r.rows[0]?.hash;
}
