// Search parameters of ViewDefinition (API.md §7: search by `name`, `url`, `status`, `resource`). The SQL on FHIR IG
// publishes none, so Cinder defines these four, in the shape of the published SearchParameter resources.
// https://hl7.org/fhir/R4/searchparameter.html
export const VIEW_DEFINITION_SEARCH_PARAMETERS = [
  { code: 'name', type: 'string', expression: 'ViewDefinition.name' },
  { code: 'url', type: 'uri', expression: 'ViewDefinition.url' },
  { code: 'status', type: 'token', expression: 'ViewDefinition.status' },
  { code: 'resource', type: 'token', expression: 'ViewDefinition.resource' },
].map((p) => ({
  ...p,
  resourceType: 'SearchParameter',
  url: `urn:cinder:SearchParameter/ViewDefinition-${p.code}`,
  base: ['ViewDefinition'],
  type: p.type as 'string' | 'uri' | 'token',
}));
