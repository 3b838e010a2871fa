// Document Bundles (https://hl7.org/fhir/R4/documents.html) for Composition/$document and Patient/$summary: the
// resources a document references, read with the caller's access (its project, its token's scopes and patient), and
// the Bundle of type `document` around them (identifier, timestamp, a fullUrl on every entry).
import type { Queryable } from '../../storage/db.js';
import { canRead } from '../access.js';
import { isResourceType } from '../definitions/index.js';
import type { RepoContext } from '../repository/context.js';
import { patientCondition } from '../search/patient-reach.js';

/** Referenced resources one document may add (beyond its Composition and section entries). */
export const MAX_REFERENCED = 1000;
/** Nesting of JSON followed when looking for references (a stored resource is already bounded by the server). */
const MAX_DEPTH = 64;

export interface DocEntry {
  fullUrl: string;
  /** The resource as JSON text. */
  json: string;
}

export interface StoredResource {
  resourceType: string;
  id: string;
  json: string;
}

const REF = /^([A-Z][A-Za-z]{1,63})\/([A-Za-z0-9\-.]{1,64})$/;

/** `Type/id` of a reference to this server (relative, or absolute under `fhirBase`); undefined for any other. */
export function localReference(reference: unknown, fhirBase: string): string | undefined {
  if (typeof reference !== 'string') return undefined;
  const ref = reference.startsWith(`${fhirBase}/`) ? reference.slice(fhirBase.length + 1) : reference;
  const m = REF.exec(ref.split('/_history/')[0] as string);
  return m && isResourceType(m[1] as string) ? `${m[1]}/${m[2]}` : undefined;
}

/** Adds every local `reference` found in `value` (any depth) to `out`, in document order; `meta` (Cinder's own record
 * of who wrote a version, `meta.author`) and contained resources are not followed. */
export function collectReferences(value: unknown, fhirBase: string, out: Set<string>, depth = 0): void {
  if (depth > MAX_DEPTH || value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const v of value) collectReferences(v, fhirBase, out, depth + 1);
    return;
  }
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (k === 'reference') {
      const ref = localReference(v, fhirBase);
      if (ref) out.add(ref);
    } else if (k !== 'contained' && k !== 'text' && k !== 'meta')
      collectReferences(v, fhirBase, out, depth + 1);
  }
}

/**
 * The live resources among `refs` (`Type/id`) that the caller may read, in the order asked: types its role and scopes
 * permit, rows of its project, in its token's patient's reach. Others are left out, whether missing or not the
 * caller's, so that a document never tells which of them exist.
 */
export async function readReferenced(
  db: Queryable,
  ctx: RepoContext,
  refs: Iterable<string>,
): Promise<StoredResource[]> {
  // Binaries are left out: their content lives outside the row and their reads follow securityContext rules.
  const wanted = [...refs]
    .filter((r) => !r.startsWith('Binary/') && canRead(ctx.actor, r.split('/')[0] as string, 'read'))
    .slice(0, MAX_REFERENCED);
  if (wanted.length === 0) return [];
  const values: unknown[] = [];
  const bind = (v: unknown): string => `$${values.push(v)}`;
  const conds = [
    `(r.resource_type, r.id) IN (SELECT * FROM unnest(${bind(wanted.map((w) => w.split('/')[0]))}::text[], ` +
      `${bind(wanted.map((w) => w.split('/')[1]))}::text[]))`,
    'NOT r.deleted',
  ];
  if (ctx.scope.projectId !== null) conds.push(`r.project_id = ${bind(ctx.scope.projectId)}`);
  const reach = patientCondition(ctx.scope, 'r', bind);
  if (reach) conds.push(reach);
  const rows = (
    await db.query<{ resource_type: string; id: string; json: string }>(
      `SELECT r.resource_type, r.id, r.content::text AS json FROM resources r WHERE ${conds.join(' AND ')}`,
      values,
    )
  ).rows;
  const byRef = new Map(rows.map((r) => [`${r.resource_type}/${r.id}`, r]));
  return wanted.flatMap((w) => {
    const r = byRef.get(w);
    return r ? [{ resourceType: r.resource_type, id: r.id, json: r.json }] : [];
  });
}

/** The fullUrl of a stored resource. */
export const fullUrlOf = (
  ctx: Pick<RepoContext, 'fhirBase'>,
  r: { resourceType: string; id: string },
): string => `${ctx.fhirBase}/${r.resourceType}/${r.id}`;

/** A Bundle of type `document` of the entries (the Composition first), as JSON text. */
export function documentBundleJson(ctx: Pick<RepoContext, 'newId' | 'clock'>, entries: DocEntry[]): string {
  const head = JSON.stringify({
    resourceType: 'Bundle',
    id: ctx.newId(),
    identifier: { system: 'urn:ietf:rfc:3986', value: `urn:uuid:${ctx.newId()}` },
    type: 'document',
    timestamp: ctx.clock().toISOString(),
  });
  const parts = entries.map((e) => `{"fullUrl":${JSON.stringify(e.fullUrl)},"resource":${e.json}}`);
  return `${head.slice(0, -1)},"entry":[${parts.join(',')}]}`;
}

/** Text for XHTML narrative: `&`, `<`, `>` and quotes escaped. */
export function escapeXhtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
