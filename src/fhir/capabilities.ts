// GET /metadata: the CapabilityStatement, derived from what is registered (types, search parameters), so it
// lists only what works. https://hl7.org/fhir/R4/capabilitystatement.html
import type { Queryable } from '../storage/db.js';
import { resourceTypes } from './definitions/index.js';
import { OPERATIONS } from './operations/index.js';
import type { OperationDefinition } from './operations/operation.js';
import { isIndexedComposite } from './search/extract-composite.js';
import { getSearchParam, searchParamsOf } from './search/registry.js';
import { FULL_TEXT_PARAMS, supportsFullText } from './search/full-text.js';
import { EXT, type ChannelType } from './subscriptions/model.js';

const INTERACTIONS = [
  'read',
  'vread',
  'update',
  'patch',
  'delete',
  'history-instance',
  'history-type',
  'create',
  'search-type',
];

/** Conditional references (repository/conditional-references.ts, R4 http.html#trules). */
const TRANSACTION_DOCUMENTATION =
  'A reference written as a search (Type?params, e.g. Patient?identifier=sys|123) is replaced by the one resource ' +
  "the search finds with the caller's access, after the deletes and the creates without such references; none or " +
  'several answer 412 and nothing is stored.';
const BATCH_DOCUMENTATION =
  'Conditional references (Type?params) are resolved per entry; an entry whose search finds none or several fails ' +
  'alone with 412.';

/** What Binary does beyond the interactions every type has (src/http/routes/binary.ts). */
const BINARY_DOCUMENTATION =
  'create and update take any Content-Type: raw bytes become the content, contentType comes from Content-Type and ' +
  'securityContext from X-Security-Context. read and vread answer the raw content with its contentType unless ' +
  'FHIR JSON or XML is asked for (Accept or _format), which gets the resource with base64 data. Search and history ' +
  'entries carry no data.';

/**
 * The channel types Subscription notifications go out on (API.md §8). R4's CapabilityStatement has no element for
 * them and the Backport IG's `backport-channel-type` extension applies to Subscription.channel.type only, so they are
 * listed with this Cinder extension (valueCode from R4's subscription-channel-type codes) on the Subscription entry.
 */
export const CHANNEL_TYPE_EXTENSION = 'https://cinder.dev/fhir/StructureDefinition/subscription-channel-type';
const CHANNEL_TYPES: readonly ChannelType[] = ['rest-hook', 'websocket'];

const SUBSCRIPTION_DOCUMENTATION =
  'Classic R4 subscriptions (criteria is a search) and topic-based ones as the Subscriptions R5 Backport IG says ' +
  '(criteria is a SubscriptionTopic canonical). Channels: rest-hook and websocket ($get-ws-binding-token). The ' +
  "topics listed here are the active SubscriptionTopics of the caller's project, for an authenticated caller only.";

/** `rest.operation` / `rest.resource.operation` entries for the operations at `level` on `type`. */
function operations(
  fhirBase: string,
  applies: (op: OperationDefinition) => boolean,
): Record<string, string>[] {
  const entries = OPERATIONS.filter(applies).map((op) => ({
    name: op.capabilityName ?? op.code,
    definition: op.definition ?? `${fhirBase}/OperationDefinition/${op.code}`,
  }));
  // One entry per operation, though it may be invoked at type and at instance level ($validate).
  return entries.filter((e, i) => entries.findIndex((x) => x.name === e.name) === i);
}

const appliesTo = (op: OperationDefinition, type: string): boolean =>
  op.level !== 'system' &&
  (op.types === 'any' || op.types === undefined ? (op.supports?.(type) ?? true) : op.types.includes(type));

const SECURITY_SERVICE = 'http://terminology.hl7.org/CodeSystem/restful-security-service';

/**
 * SMART App Launch 2.x "Conformance": the authorize and token endpoints as the `oauth-uris` extension beside
 * `.well-known/smart-configuration` (https://hl7.org/fhir/smart-app-launch/conformance.html). `{fhir}` is
 * `{base}fhir/R4` (API.md), so the OAuth endpoints lie under `{base}`.
 */
function securityOf(fhirBase: string): Record<string, unknown> {
  const base = fhirBase.endsWith('fhir/R4') ? fhirBase.slice(0, -'fhir/R4'.length) : `${fhirBase}/`;
  return {
    cors: true,
    extension: [
      {
        url: 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris',
        extension: [
          // The authorization endpoint, for apps that discover it here (EHR launch, API.md §11).
          { url: 'authorize', valueUri: `${base}oauth2/authorize` },
          { url: 'token', valueUri: `${base}oauth2/token` },
          { url: 'revoke', valueUri: `${base}oauth2/revoke` },
        ],
      },
    ],
    service: [
      { coding: [{ system: SECURITY_SERVICE, code: 'SMART-on-FHIR' }] },
      { coding: [{ system: SECURITY_SERVICE, code: 'OAuth' }] },
    ],
  };
}

/** `_text` and `_content` where they apply (search/full-text.ts), with R4's definitions. */
const fullTextParams = (type: string): { name: string; type: 'string'; definition: string }[] =>
  [...FULL_TEXT_PARAMS]
    .filter((code) => supportsFullText(type, code))
    .map((code) => ({
      name: code,
      type: 'string' as const,
      definition: `http://hl7.org/fhir/SearchParameter/${code === '_text' ? 'DomainResource-text' : 'Resource-content'}`,
    }));

/** `Type:param` of every reference parameter of `type` (what `_include` takes). */
const includesOf = (type: string): string[] =>
  searchParamsOf(type)
    .filter((p) => p.type === 'reference')
    .map((p) => `${type}:${p.code}`);

let revIncludeMap: Map<string, string[]> | undefined;

/** By target type: `Source:param` of every reference parameter that may point at it (what `_revinclude` takes). */
function revIncludes(): Map<string, string[]> {
  if (revIncludeMap) return revIncludeMap;
  const map = new Map<string, string[]>();
  // AuditEvents live in the audit table (API.md §10), which `_revinclude` does not read.
  const all = resourceTypes().filter((t) => t !== 'AuditEvent');
  for (const source of all) {
    for (const p of searchParamsOf(source)) {
      if (p.type !== 'reference') continue;
      for (const target of p.targets) {
        let list = map.get(target);
        if (!list) map.set(target, (list = []));
        list.push(`${source}:${p.code}`);
      }
    }
  }
  revIncludeMap = map;
  return map;
}

/**
 * The CapabilityStatement of this server. `topicUrls`: the SubscriptionTopic canonicals to advertise on the
 * Subscription entry (the caller's project's active topics, activeTopicUrls); none for an anonymous caller.
 */
export function capabilityStatement(
  fhirBase: string,
  now: Date,
  topicUrls: readonly string[] = [],
): Record<string, unknown> {
  return withSubscriptionTopics(baseStatement(fhirBase, now), topicUrls);
}

/**
 * AuditEvent (API.md §10) lives in the audit table: read, search and a client's own create; no update, patch, delete or
 * history; its search parameters are the table's columns.
 */
function auditEventEntry(fhirBase: string): Record<string, unknown> {
  const params: [string, string][] = [
    ['_id', 'token'],
    ['date', 'date'],
    ['agent', 'reference'],
    ['entity', 'reference'],
    ['patient', 'reference'],
    ['type', 'token'],
    ['subtype', 'token'],
    ['action', 'token'],
    ['outcome', 'token'],
  ];
  return {
    type: 'AuditEvent',
    documentation:
      'The audit trail: every request records an AuditEvent (IHE BALP). Project administrators search their ' +
      "project's, a patient reads those about themselves; nobody changes or deletes one.",
    interaction: ['read', 'vread', 'search-type', 'create'].map((code) => ({ code })),
    searchInclude: [],
    searchRevInclude: [],
    versioning: 'no-version',
    readHistory: false,
    updateCreate: false,
    conditionalCreate: false,
    conditionalUpdate: false,
    conditionalDelete: 'not-supported',
    searchParam: params.map(([name, type]) => {
      const known = searchParamsOf('AuditEvent').find((p) => p.code === name);
      return { name, type, ...(known?.url ? { definition: known.url } : {}) };
    }),
    operation: operations(fhirBase, (op) => appliesTo(op, 'AuditEvent')),
  };
}

function baseStatement(fhirBase: string, now: Date): Record<string, unknown> {
  return {
    resourceType: 'CapabilityStatement',
    status: 'active',
    date: now.toISOString(),
    kind: 'instance',
    software: { name: 'Cinder', version: '0.1.0' },
    implementation: { description: 'Cinder FHIR R4 server', url: fhirBase },
    fhirVersion: '4.0.1',
    format: ['application/fhir+json', 'json', 'application/fhir+xml', 'xml'],
    patchFormat: ['application/json-patch+json', 'application/fhir+json', 'application/fhir+xml'],
    rest: [
      {
        mode: 'server',
        security: securityOf(fhirBase),
        interaction: [
          { code: 'transaction', documentation: TRANSACTION_DOCUMENTATION },
          { code: 'batch', documentation: BATCH_DOCUMENTATION },
          { code: 'search-system' },
          { code: 'history-system' },
        ],
        searchParam: systemSearchParams(),
        operation: operations(fhirBase, (op) => op.level === 'system'),
        resource: resourceTypes().map((type) =>
          type === 'AuditEvent'
            ? auditEventEntry(fhirBase)
            : {
                ...(type === 'Subscription'
                  ? {
                      extension: CHANNEL_TYPES.map((valueCode) => ({
                        url: CHANNEL_TYPE_EXTENSION,
                        valueCode,
                      })),
                    }
                  : {}),
                type,
                ...(type === 'Binary' ? { documentation: BINARY_DOCUMENTATION } : {}),
                ...(type === 'Subscription' ? { documentation: SUBSCRIPTION_DOCUMENTATION } : {}),
                interaction: INTERACTIONS.map((code) => ({ code })),
                versioning: 'versioned',
                readHistory: true,
                updateCreate: true,
                conditionalCreate: true,
                conditionalRead: 'full-support',
                conditionalUpdate: true,
                conditionalDelete: 'single',
                searchInclude: ['*', ...includesOf(type)],
                searchRevInclude: ['*', ...(revIncludes().get(type) ?? [])],
                searchParam: searchParamsOf(type)
                  .filter((p) => p.type !== 'special' && (p.type !== 'composite' || isIndexedComposite(p)))
                  .map((p) => ({ name: p.code, type: p.type, ...(p.url ? { definition: p.url } : {}) }))
                  .concat(fullTextParams(type)),
                operation: operations(fhirBase, (op) => appliesTo(op, type)),
              },
        ),
      },
    ],
  };
}

/**
 * The parameters of a system-level search without `_type` (those of every resource type), and `_filter`, which every
 * type's search takes (search/filter.ts).
 */
function systemSearchParams(): Record<string, string>[] {
  const common = ['_id', '_lastUpdated', '_tag', '_profile', '_security', '_source', '_text', '_content'].map(
    (code) => {
      const p = getSearchParam('Patient', code);
      return { name: code, type: p?.type ?? 'token', ...(p?.url ? { definition: p.url } : {}) };
    },
  );
  return [
    ...common,
    {
      name: '_filter',
      type: 'special',
      documentation:
        'R4 search_filter.html: and, or, not, parentheses; eq ne co sw ew gt lt ge le ap sa eb pr',
    },
  ];
}

interface CsResourceEntry {
  type: string;
  extension?: { url: string }[];
}

/**
 * `statement` with one `capabilitystatement-subscriptiontopic-canonical` extension (the Backport IG's, on
 * CapabilityStatement.rest.resource) per topic URL on its Subscription entry, after the entry's own extensions. A
 * new object: `statement` is left as it is (the route builds it once and adds each caller's topics).
 */
export function withSubscriptionTopics(
  statement: Record<string, unknown>,
  topicUrls: readonly string[],
): Record<string, unknown> {
  if (topicUrls.length === 0) return statement;
  const rest = statement.rest as { resource: CsResourceEntry[] }[];
  return {
    ...statement,
    rest: rest.map((r) => ({
      ...r,
      resource: r.resource.map((entry) =>
        entry.type === 'Subscription'
          ? {
              ...entry,
              extension: [
                ...(entry.extension ?? []),
                ...topicUrls.map((valueCanonical) => ({ url: EXT.capabilityTopic, valueCanonical })),
              ],
            }
          : entry,
      ),
    })),
  };
}

/**
 * The canonical URLs of the active SubscriptionTopics of `projectId`, sorted. The table is generic, so this answers
 * (nothing) before SubscriptionTopic is a registered type.
 */
export async function activeTopicUrls(db: Queryable, projectId: string): Promise<string[]> {
  const r = await db.query<{ url: string }>(
    `SELECT DISTINCT content->>'url' AS url FROM resources
      WHERE resource_type = 'SubscriptionTopic' AND project_id = $1 AND NOT deleted
        AND content->>'status' = 'active' AND content->>'url' IS NOT NULL
      ORDER BY 1`,
    [projectId],
  );
  return r.rows.map((row) => row.url);
}

/**
 * `statement` with the shared packages' search parameters (API.md §9: every project searches with them) added to
 * their types' `searchParam`, `definition` their canonical URL. A new object; `statement` is left as it is.
 */
export function withSharedSearchParams(
  statement: Record<string, unknown>,
  params: readonly { base: string; code: string; type: string; url: string }[],
): Record<string, unknown> {
  if (params.length === 0) return statement;
  const rest = statement.rest as { resource: (CsResourceEntry & { searchParam?: unknown[] })[] }[];
  return {
    ...statement,
    rest: rest.map((r) => ({
      ...r,
      resource: r.resource.map((entry) => {
        const added = params.filter((p) => p.base === entry.type);
        if (added.length === 0) return entry;
        const extra = added.map((p) => ({
          name: p.code,
          type: p.type,
          ...(p.url ? { definition: p.url } : {}),
        }));
        return { ...entry, searchParam: [...(entry.searchParam ?? []), ...extra] };
      }),
    })),
  };
}
