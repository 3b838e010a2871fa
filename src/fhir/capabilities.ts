// GET /metadata: the CapabilityStatement, derived from what is registered (types, search parameters), so it
// lists only what works. https://hl7.org/fhir/R4/capabilitystatement.html
import { resourceTypes } from './definitions/index.js';
import { OPERATIONS } from './operations/index.js';
import type { OperationDefinition } from './operations/operation.js';
import { isIndexedComposite } from './search/extract-composite.js';
import { searchParamsOf } from './search/registry.js';

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

/** What Binary does beyond the interactions every type has (src/http/routes/binary.ts). */
const BINARY_DOCUMENTATION =
  'create and update take any Content-Type: raw bytes become the content, contentType comes from Content-Type and ' +
  'securityContext from X-Security-Context. read and vread answer the raw content with its contentType unless ' +
  'FHIR JSON is asked for (Accept or _format), which gets the resource with base64 data. Search and history ' +
  'entries carry no data.';

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
 * SMART App Launch 2.x "Conformance": the token endpoint as the `oauth-uris` extension beside
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
  const all = resourceTypes();
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

export function capabilityStatement(fhirBase: string, now: Date): Record<string, unknown> {
  return {
    resourceType: 'CapabilityStatement',
    status: 'active',
    date: now.toISOString(),
    kind: 'instance',
    software: { name: 'Cinder', version: '0.1.0' },
    implementation: { description: 'Cinder FHIR R4 server', url: fhirBase },
    fhirVersion: '4.0.1',
    format: ['application/fhir+json', 'json'],
    patchFormat: ['application/json-patch+json'],
    rest: [
      {
        mode: 'server',
        security: securityOf(fhirBase),
        interaction: [{ code: 'transaction' }, { code: 'batch' }, { code: 'history-system' }],
        operation: operations(fhirBase, (op) => op.level === 'system'),
        resource: resourceTypes().map((type) => ({
          type,
          ...(type === 'Binary' ? { documentation: BINARY_DOCUMENTATION } : {}),
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
            .map((p) => ({ name: p.code, type: p.type, ...(p.url ? { definition: p.url } : {}) })),
          operation: operations(fhirBase, (op) => appliesTo(op, type)),
        })),
      },
    ],
  };
}
