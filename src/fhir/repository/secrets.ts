// Secrets never live in resource content (API.md §2–§3): every write-only element is taken out before a version is
// stored — hashed or kept in the `credentials` table, or dropped — so no read, search, history or export can return it.
import crypto from 'node:crypto';
import type { Queryable } from '../../storage/db.js';
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import { parseHeaders } from '../subscriptions/subscription-resource.js';

/**
 * A credential to store with the resource. `hash`: only its SHA-256 (or bcrypt) hash is needed to check it.
 * `secret`: the server must send it on later (the identity provider's client secret), so it is kept as given;
 * `null` forgets the stored one.
 */
export type ExtractedSecret =
  | { kind: 'client_secret' | 'client_secret_set' | 'password_hash'; hash: string }
  | { kind: 'idp_client_secret' | 'subscription_headers'; secret: string | null };

type HashedKind = Extract<ExtractedSecret, { hash: string }>['kind'];

export function sha256(text: string): string {
  return crypto.createHash('sha256').update(text).digest('hex');
}

export function generateSecret(): string {
  return crypto.randomBytes(32).toString('base64url');
}

/**
 * Write-only elements of the supported types that Cinder does not use: dropped on every write (a secret that nothing
 * reads must not be readable). The Medplum definitions carry them; Medplum itself returns several to admins.
 */
const DROPPED: Readonly<Record<string, readonly (readonly string[])[]>> = {
  ClientApplication: [['retiringSecret']],
  // Passwords are set only through the login service (bcrypt); a hash sent through FHIR is dropped.
  User: [['password'], ['passwordHash'], ['mfaSecret']],
  Login: [['code'], ['refreshSecret']],
  Project: [['secret'], ['systemSecret'], ['site', 'googleClientSecret'], ['site', 'recaptchaSecretKey']],
};

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Removes the element at `path` (through arrays of backbone elements) from a copy; `node` is already a copy. */
function drop(node: Record<string, unknown>, path: readonly string[]): void {
  const [head, ...rest] = path as [string, ...string[]];
  if (!(head in node)) return;
  if (rest.length === 0) {
    delete node[head];
    return;
  }
  const child = node[head];
  if (Array.isArray(child)) {
    node[head] = child.map((c: unknown) => {
      if (!isRecord(c)) return c;
      const copy = { ...c };
      drop(copy, rest);
      return copy;
    });
  } else if (isRecord(child)) {
    const copy = { ...child };
    drop(copy, rest);
    node[head] = copy;
  }
}

/** ClientApplication.identityProvider.clientSecret: optional, write-only, kept apart (API.md §2). */
function extractIdpSecret(
  resource: Record<string, unknown>,
  isCreate: boolean,
): { resource: Record<string, unknown>; secret?: ExtractedSecret } {
  const idp = resource.identityProvider;
  if (!isRecord(idp)) {
    // No identity provider any more: its secret is forgotten, so re-adding one later does not revive it.
    return isCreate ? { resource } : { resource, secret: { kind: 'idp_client_secret', secret: null } };
  }
  if (!('clientSecret' in idp)) return { resource };
  const { clientSecret, ...rest } = idp;
  if (typeof clientSecret !== 'string' || clientSecret.length === 0) {
    // Refused rather than left for validation to describe: the message must not quote the value.
    throw new FhirError(
      'invalid',
      'ClientApplication.identityProvider.clientSecret must be a non-empty string',
      'secrets.idp-client-secret',
      { expression: ['ClientApplication.identityProvider.clientSecret'] },
    );
  }
  return {
    resource: { ...resource, identityProvider: rest },
    secret: { kind: 'idp_client_secret', secret: clientSecret },
  };
}

/**
 * Removes secret elements from a resource. For a new ClientApplication without a secret one is generated;
 * `revealed` is the plain secret to show once in the create response. An update without a secret keeps the stored one.
 */
export function extractSecrets(
  resource: Resource,
  isCreate: boolean,
): { resource: Resource; secrets: ExtractedSecret[]; revealed?: string } {
  if (resource.resourceType === 'Subscription') return extractSubscriptionHeaders(resource);
  const dropped = DROPPED[resource.resourceType];
  if (!dropped) return { resource, secrets: [] };
  let clean: Record<string, unknown> = { ...resource };
  for (const path of dropped) drop(clean, path);
  const secrets: ExtractedSecret[] = [];
  let revealed: string | undefined;
  if (resource.resourceType === 'ClientApplication') {
    const { secret, ...rest } = clean;
    let plain = typeof secret === 'string' && secret.length > 0 ? secret : undefined;
    if (!plain && isCreate) {
      plain = generateSecret();
      revealed = plain;
    }
    if (plain) secrets.push({ kind: 'client_secret', hash: sha256(plain) });
    // A secret the writer chose makes the client confidential (src/auth/client-auth.ts); a generated one does not.
    if (plain && !revealed) secrets.push({ kind: 'client_secret_set', hash: sha256(plain) });
    const idp = extractIdpSecret(rest, isCreate);
    clean = idp.resource;
    if (idp.secret) secrets.push(idp.secret);
  }
  return { resource: clean as Resource, secrets, ...(revealed ? { revealed } : {}) };
}

/**
 * Subscription.channel.header (API.md §8): write-only, like a secret — the values often carry the receiver's
 * credentials. Kept apart as JSON `[name, value][]`; an update without headers keeps the stored ones.
 */
function extractSubscriptionHeaders(resource: Resource): { resource: Resource; secrets: ExtractedSecret[] } {
  const channel = resource.channel as Record<string, unknown> | undefined;
  if (!isRecord(channel) || !('header' in channel)) return { resource, secrets: [] };
  const { header, ...rest } = channel;
  const pairs = parseHeaders(header);
  return {
    resource: { ...resource, channel: rest },
    secrets: [{ kind: 'subscription_headers', secret: JSON.stringify(pairs) }],
  };
}

/** The headers a Subscription's notifications carry (extractSubscriptionHeaders). */
export async function readSubscriptionHeaders(db: Queryable, id: string): Promise<[string, string][]> {
  const r = await db.query<{ secret: string | null }>(
    `SELECT secret FROM credentials WHERE resource_type = 'Subscription' AND id = $1 AND kind = 'subscription_headers'`,
    [id],
  );
  const text = r.rows[0]?.secret;
  return text ? (JSON.parse(text) as [string, string][]) : [];
}

export async function storeSecrets(
  tx: Queryable,
  resourceType: string,
  id: string,
  secrets: readonly ExtractedSecret[],
): Promise<void> {
  for (const s of secrets) {
    if ('hash' in s) {
      await tx.query(
        `INSERT INTO credentials (resource_type, id, kind, hash) VALUES ($1, $2, $3, $4)
         ON CONFLICT (resource_type, id, kind) DO UPDATE SET hash = EXCLUDED.hash, secret = NULL, updated_at = now()`,
        [resourceType, id, s.kind, s.hash],
      );
    } else if (s.secret === null) {
      await tx.query('DELETE FROM credentials WHERE resource_type = $1 AND id = $2 AND kind = $3', [
        resourceType,
        id,
        s.kind,
      ]);
    } else {
      await tx.query(
        `INSERT INTO credentials (resource_type, id, kind, secret) VALUES ($1, $2, $3, $4)
         ON CONFLICT (resource_type, id, kind) DO UPDATE SET secret = EXCLUDED.secret, hash = NULL, updated_at = now()`,
        [resourceType, id, s.kind, s.secret],
      );
    }
  }
}

/** The stored hash of a credential that is only ever compared (client secret, password). */
export async function readCredential(
  db: Queryable,
  resourceType: string,
  id: string,
  kind: HashedKind,
): Promise<string | undefined> {
  const r = await db.query<{ hash: string | null }>(
    'SELECT hash FROM credentials WHERE resource_type = $1 AND id = $2 AND kind = $3',
    [resourceType, id, kind],
  );
  return r.rows[0]?.hash ?? undefined;
}

/** The client secret Cinder holds at a ClientApplication's identity provider, for calls that need it. */
export async function readIdpClientSecret(db: Queryable, clientId: string): Promise<string | undefined> {
  const r = await db.query<{ secret: string | null }>(
    `SELECT secret FROM credentials WHERE resource_type = 'ClientApplication' AND id = $1 AND kind = 'idp_client_secret'`,
    [clientId],
  );
  return r.rows[0]?.secret ?? undefined;
}
