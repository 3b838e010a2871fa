// GET /metadata: the CapabilityStatement, derived from what is registered (types, search parameters), so it
// lists only what works. https://hl7.org/fhir/R4/capabilitystatement.html
import { resourceTypes } from './definitions/index.js';
import { OPERATIONS } from './operations/index.js';
import type { OperationDefinition } from './operations/operation.js';
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

/** `rest.operation` / `rest.resource.operation` entries for the operations at `level` on `type`. */
function operations(
  fhirBase: string,
  applies: (op: OperationDefinition) => boolean,
): Record<string, string>[] {
  return OPERATIONS.filter(applies).map((op) => ({
    name: op.code,
    definition: op.definition ?? `${fhirBase}/OperationDefinition/${op.code}`,
  }));
}

const appliesTo = (op: OperationDefinition, type: string): boolean =>
  op.level !== 'system' &&
  (op.types === 'any' || op.types === undefined ? (op.supports?.(type) ?? true) : op.types.includes(type));

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
        security: {
          cors: false,
          service: [
            {
              coding: [
                { system: 'http://terminology.hl7.org/CodeSystem/restful-security-service', code: 'OAuth' },
              ],
            },
          ],
        },
        interaction: [{ code: 'transaction' }, { code: 'batch' }],
        operation: operations(fhirBase, (op) => op.level === 'system'),
        resource: resourceTypes().map((type) => ({
          type,
          interaction: INTERACTIONS.map((code) => ({ code })),
          versioning: 'versioned',
          readHistory: true,
          updateCreate: true,
          conditionalCreate: true,
          searchInclude: ['*'],
          searchParam: searchParamsOf(type)
            .filter((p) => p.type !== 'composite' && p.type !== 'special')
            .map((p) => ({ name: p.code, type: p.type, ...(p.url ? { definition: p.url } : {}) })),
          operation: operations(fhirBase, (op) => appliesTo(op, type)),
        })),
      },
    ],
  };
}
