// GET /metadata: the CapabilityStatement, derived from what is registered (types, search parameters), so it
// lists only what works. https://hl7.org/fhir/R4/capabilitystatement.html
import { resourceTypes } from './definitions/index.js';
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
        })),
      },
    ],
  };
}
