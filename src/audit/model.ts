// The audit trail's shared vocabulary (API.md §10): what a request's AuditEvent is made of, the stored row, and the
// seams between the pieces (the recorder a request carries, the writer that stores rows, the chain that seals and
// verifies them). BALP: https://profiles.ihe.net/ITI/BALP/ (IHE Basic Audit Log Patterns, R4 AuditEvent).
import { createHash } from 'node:crypto';
import type { Queryable } from '../storage/db.js';

/** The FHIR interactions of audit-event-sub-type (http://hl7.org/fhir/restful-interaction) that API.md §10 names. */
export type RestInteraction =
  | 'read'
  | 'vread'
  | 'update'
  | 'patch'
  | 'delete'
  | 'history'
  | 'create'
  | 'search'
  | 'batch'
  | 'transaction'
  | 'operation';

/** What a request was: a REST interaction, or (DICOM 110114 User Authentication) a login or a logout. */
export type AuditKind = RestInteraction | 'login' | 'logout';

/** The requester (BALP agent with `requestor: true`). */
export interface AuditAgent {
  /** `<Type>/<id>` of the profile or ClientApplication; absent when the request had no login. */
  who?: string;
  /** `ProjectMembership/<id>` the login went through. */
  membership?: string;
  /** The OAuth client (`ClientApplication/<id>`) the login was issued to, when not the requester itself. */
  client?: string;
  /** What a failed login tried (the username or client_id; never a secret). */
  identifier?: string;
  /** Network address the request came from. */
  address?: string;
}

/** One resource the request read or wrote (BALP entity with `what`). */
export interface AuditEntity {
  /** `<Type>/<id>` */
  reference: string;
  /** The version read or written. */
  version?: string;
}

/** One stored AuditEvent: the JSON as served and hashed, and the columns search reads (migration 018). */
export interface AuditRow {
  id: string;
  /** The project of the request's login; '' when there was none. */
  projectId: string;
  recorded: Date;
  /** `system|code` */
  type: string;
  /** Each subtype as `system|code`. */
  subtype: string[];
  action: string | null;
  outcome: string;
  /** `Type/id` of each agent.who (and each agent's membership). */
  agents: string[];
  /** `Type/id` of each entity.what. */
  entities: string[];
  /** `Patient/<id>` of each patient entity. */
  patients: string[];
  /** The AuditEvent JSON, exactly as stored, hashed and served. */
  content: string;
}

/** Result of verifying one project's chain (chain.ts). */
export interface ChainVerification {
  /** True when every sealed row's hash and link is intact and the chain reaches the recorded head. */
  valid: boolean;
  /** Rows checked. */
  checked: number;
  /** The hash of the last link checked (an operator may keep it to compare with a later verification). */
  head?: string;
  /** The first broken link: the AuditEvent whose stored row does not match the chain, and why. */
  broken?: { id: string; chainNo: number; reason: string };
}

/** Seals and verifies the per-project hash chains (chain.ts). */
export interface AuditChain {
  /** Seals every row not yet sealed, project by project in insertion order; safe to run on several instances at once. */
  seal(db: Queryable): Promise<number>;
  /** Seals, then walks `projectId`'s chain from its first remaining row to its head; names the first broken link. */
  verify(projectId: string): Promise<ChainVerification>;
}

/**
 * JSON.stringify for what the audit table stores: PostgreSQL's text holds no NUL character, so one in a value (an error
 * message quoting the input, a user name tried) becomes U+FFFD — else the row, and the batch with it, could not be
 * stored at all.
 */
export function storableJson(value: unknown): string {
  // Every request's AuditEvent passes here: JSON.stringify without a replacer is several times faster (a replacer is a
  // call per value), and escapes a NUL as `\u0000`. Only text holding that sequence (a NUL, or rarely the same six
  // characters escaped) is serialised again with the replacer.
  const text = JSON.stringify(value);
  return text !== undefined && text.includes('\\u0000') ? JSON.stringify(value, withoutNul) : text;
}

const withoutNul = (_key: string, v: unknown): unknown =>
  typeof v === 'string' && v.includes('\0') ? v.replace(/\0/g, '\uFFFD') : v;

/** Hex sha256 of an AuditEvent's stored JSON (UTF-8): what its link in the chain covers. */
export function contentHash(content: string): string {
  return createHash('sha256').update(content, 'utf8').digest('hex');
}
