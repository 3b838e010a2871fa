// SMART resource scopes (https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html):
// `<system|user|patient>/<Type|*>.<x>` with v1 `read | write | *` or v2 letters `cruds`. What a client is granted at
// the token endpoint, what a user is granted at the authorize endpoint, and what a token's `scope` claim permits,
// expressed as the ResourceScopes fhir/access.ts decides on.
import { LRUCache } from 'lru-cache';
import { canRead, canWrite, type Actor, type ResourceScope } from '../fhir/access.js';
import { isResourceType } from '../fhir/definitions/index.js';
import { OAuthError } from './oauth-error.js';

/** SMART v1 suffixes as v2 letters (SMART 2.x "Scopes for requesting FHIR resources", v1 → v2 equivalence). */
const V1: Readonly<Record<string, string>> = { read: 'rs', write: 'cud', '*': 'cruds' };
const V1_BACK: Readonly<Record<string, string>> = { rs: 'read', cud: 'write', cruds: '*' };
// v2 letters appear in this order (SMART 2.x: "cruds" order is required); at least one.
const RESOURCE_SCOPE = /^(system|user|patient)\/(\*|[A-Z][A-Za-z]{0,63})\.(read|write|\*|c?r?u?d?s?)$/;
/** Scopes of SMART's resource-scope syntax, whatever their context: a token naming any is limited to them. */
export const RESOURCE_LIKE = /^(system|user|patient)\//;

/** Non-resource scopes a client_credentials token may carry; each leaves the token unlimited, as before scopes. */
const CLIENT_SCOPES = new Set(['openid']);

export type ScopeContext = 'system' | 'user' | 'patient';

export interface ParsedScope extends ResourceScope {
  v1: boolean;
  context?: ScopeContext;
}

/**
 * A resource scope of any context, or undefined when the text is not one we support (unknown types, granular
 * `?param=` forms).
 */
export function parseResourceScope(text: string): (ParsedScope & { context: ScopeContext }) | undefined {
  const m = RESOURCE_SCOPE.exec(text);
  if (!m) return undefined;
  const context = m[1] as ScopeContext;
  const type = m[2] as string;
  const suffix = m[3] as string;
  if (suffix === '' || (type !== '*' && !isResourceType(type))) return undefined;
  const v1 = suffix in V1;
  return { type, permissions: v1 ? (V1[suffix] as string) : suffix, v1, context };
}

/** A system scope, or undefined when the text is not one we support (other contexts, unknown types, query parts). */
export function parseSystemScope(text: string): ParsedScope | undefined {
  const parsed = parseResourceScope(text);
  if (parsed?.context !== 'system') return undefined;
  return { type: parsed.type, permissions: parsed.permissions, v1: parsed.v1 };
}

export function formatScope(s: ParsedScope): string {
  const back = s.v1 ? V1_BACK[s.permissions] : undefined;
  return `${s.context ?? 'system'}/${s.type}.${back ?? s.permissions}`;
}

export const split = (text: string): string[] => [...new Set(text.split(/\s+/).filter((x) => x !== ''))];

/**
 * The permissions of `s` the actor holds by its role (fhir/access.ts): a named type loses the letters the role lacks
 * (a member asking for `system/ClientApplication.rs` gets nothing); `*` keeps them all, since access.ts still applies
 * the role per type at each request.
 */
export function withinRole(actor: Actor, s: ParsedScope): ParsedScope {
  if (s.type === '*') return s;
  const unscoped: Actor = {
    projectId: actor.projectId,
    projectAdmin: actor.projectAdmin,
    superAdmin: actor.superAdmin,
  };
  const holds: Record<string, boolean> = {
    c: canWrite(unscoped, s.type, 'create'),
    r: canRead(unscoped, s.type, 'read'),
    u: canWrite(unscoped, s.type, 'update'),
    d: canWrite(unscoped, s.type, 'delete'),
    s: canRead(unscoped, s.type, 'search'),
  };
  const permissions = [...s.permissions].filter((l) => holds[l]).join('');
  // A v1 scope stays v1 only while its letters are still a v1 set; otherwise the v2 letters say what is left.
  return { ...s, permissions, v1: s.v1 && permissions in V1_BACK };
}

/** How a client proved who it is shapes what it may ask for (see grantClientScope). */
export interface GrantRules {
  /**
   * SMART Backend Services (a signed client assertion): `scope` is required and must name system scopes, and only
   * read access (`r`, `s`; v1 `read`) is granted, as a Bulk Data server grants (BDT "Rejects explicit mutation
   * scopes"): write letters are dropped, and a request for writes only is `invalid_scope`.
   */
  backendServices?: boolean;
}

/**
 * The `scope` granted to a client_credentials login (RFC 6749 §3.3): the requested system scopes within the client's
 * role, plus `openid` when asked; other scopes are ignored. A request without system scopes gets `openid` (no
 * resource limit), as every client login did before SMART scopes. System scopes asked, none grantable: `invalid_scope`
 * — a client asking to be limited must never leave with an unlimited token.
 */
export function grantClientScope(
  actor: Actor,
  requested: string | undefined,
  rules: GrantRules = {},
): string {
  const asked = split(requested ?? '');
  if (rules.backendServices && !asked.some((s) => s.startsWith('system/')))
    throw new OAuthError('invalid_scope', 'scope must name system scopes such as system/*.rs');
  if (!asked.some((s) => RESOURCE_LIKE.test(s))) return 'openid';
  const granted: string[] = [];
  for (const text of asked) {
    if (CLIENT_SCOPES.has(text)) {
      granted.push(text);
      continue;
    }
    const parsed = parseSystemScope(text);
    if (!parsed) continue;
    const held = withinRole(actor, rules.backendServices ? readOnly(parsed) : parsed);
    if (held.permissions !== '') granted.push(formatScope(held));
  }
  const unique = [...new Set(granted)];
  if (!unique.some((s) => RESOURCE_LIKE.test(s))) {
    throw new OAuthError('invalid_scope', 'None of the requested scopes can be granted to this client');
  }
  return unique.join(' ');
}

/** The read letters of a scope (`system/*.*` → `system/*.read`, `system/Patient.cruds` → `system/Patient.rs`). */
function readOnly(s: ParsedScope): ParsedScope {
  const permissions = [...s.permissions].filter((l) => l === 'r' || l === 's').join('');
  return { type: s.type, permissions, v1: s.v1 && permissions in V1_BACK };
}

// Parsing a claim costs a few regex matches; tokens repeat, so each distinct claim is parsed once per process.
const parsedClaims = new LRUCache<string, { scopes: readonly ResourceScope[] | null }>({ max: 1000 });

/**
 * The resource scopes a token's `scope` claim limits it to, or undefined when it names none (today's `openid`,
 * `offline_access` … tokens stay unlimited). `user/` scopes limit by type and interaction like `system/` ones;
 * `patient/` scopes also reach only the compartment of the patient in context (fhir/access.ts scopeReach). A claim with resource-like scopes that are not supported keeps only
 * the supported ones — possibly none, which permits nothing — so an unknown form never widens a token.
 */
export function resourceScopesOf(claim: unknown): readonly ResourceScope[] | undefined {
  if (typeof claim !== 'string') return undefined;
  let entry = parsedClaims.get(claim);
  if (!entry) {
    const texts = split(claim).filter((s) => RESOURCE_LIKE.test(s));
    const scopes = texts
      .map(parseResourceScope)
      .filter((s) => s !== undefined)
      .map((s) => ({
        type: s.type,
        permissions: s.permissions,
        ...(s.context === 'patient' ? { patient: true } : {}),
      }));
    entry = { scopes: texts.length === 0 ? null : scopes };
    parsedClaims.set(claim, entry);
  }
  return entry.scopes ?? undefined;
}

/** Examples of the scopes clients may ask for (smart-configuration `scopes_supported`). */
export const SYSTEM_SCOPES_SUPPORTED = [
  'system/*.read',
  'system/*.write',
  'system/*.*',
  'system/*.rs',
  'system/*.cud',
  'system/*.cruds',
  'system/Patient.rs',
  'system/Observation.rs',
];
