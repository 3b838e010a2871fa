// ViewDefinition (SQL on FHIR v2, https://sql-on-fhir.org/ig/StructureDefinition-ViewDefinition.html) as a resource
// type. Medplum publishes it as a logical model: without the DomainResource elements every stored resource has (id,
// meta, text, extension, ...), and from before `select.repeat` was added to the specification. Both are added here
// to the published definition, so the same validator checks it as every other type.
export interface ViewSdElement {
  path: string;
  min?: number;
  max?: string;
  type?: { code: string }[];
  contentReference?: string;
  isSummary?: boolean;
  [k: string]: unknown;
}

export interface ViewSd {
  name: string;
  kind?: string;
  fhirVersion?: string;
  snapshot?: { element: ViewSdElement[] };
  [k: string]: unknown;
}

/** The published logical ViewDefinition as a resource: DomainResource's elements, and `select.repeat`. */
export function viewDefinitionAsResource(logical: ViewSd, domainResource: ViewSd): ViewSd {
  const own = logical.snapshot?.element ?? [];
  const base = (domainResource.snapshot?.element ?? [])
    .filter((e) => e.path.startsWith('DomainResource.'))
    .map((e) => ({ ...e, path: e.path.replace(/^DomainResource\./, 'ViewDefinition.') }))
    .filter((e) => !own.some((o) => o.path === e.path));
  const element = [...own.slice(0, 1), ...base, ...own.slice(1)];
  if (!element.some((e) => e.path === 'ViewDefinition.select.repeat')) {
    const at = element.findIndex((e) => e.path === 'ViewDefinition.select.forEachOrNull');
    element.splice(at + 1, 0, {
      path: 'ViewDefinition.select.repeat',
      min: 0,
      max: '*',
      type: [{ code: 'string' }],
    });
  }
  return { ...logical, kind: 'resource', fhirVersion: '4.0.1', snapshot: { element } };
}
