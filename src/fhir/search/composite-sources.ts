// Composite search parameters whose components are read from rows the index holds anyway, so that they need no
// `<code>$<k>` rows of their own (issue 30, fewer bytes per resource; migration 027 deletes the old ones).
// https://hl7.org/fhir/R4/search.html#composite
//
// - An element that is the resource itself (`Observation.code-value-quantity`, expression `Observation`) has one
//   element per resource: its components are the resource's ordinary rows of the component parameters, joined by rid.
// - `Observation | Observation.component` (the `combo-` composites) is the resource (as above) or one of its components,
//   whose rows the `component-` composite of the same components already holds, each component under its own `grp`.
//
// Only where the ordinary parameter indexes exactly what the component's expression finds on the resource: `code` is
// `Observation.code` either way; `value.as(Quantity)` is `value-quantity` (its other part, `value as SampledData`,
// yields no quantity: a SampledData has no `value`), `value.as(CodeableConcept)` is `value-concept`. Not
// `code-value-string` (`value-string` also indexes a CodeableConcept's text) nor `code-value-date` (`as(DateTime)` is
// not `as(dateTime)`): they keep their rows. composite-sources.test.ts checks that both ways match the same resources.

/** Where one kind of the composite's elements is found. */
export type CompositeSource =
  /** The resource itself: the ordinary rows of these parameters (one per component, in order). */
  | { ordinary: readonly string[] }
  /** Elements another composite with the same components indexes: its `<code>$<k>` rows. */
  | { rows: string };

const SOURCES: Readonly<Record<string, Readonly<Record<string, readonly CompositeSource[]>>>> = {
  Observation: {
    'code-value-quantity': [{ ordinary: ['code', 'value-quantity'] }],
    'code-value-concept': [{ ordinary: ['code', 'value-concept'] }],
    'combo-code-value-quantity': [
      { ordinary: ['code', 'value-quantity'] },
      { rows: 'component-code-value-quantity' },
    ],
    'combo-code-value-concept': [
      { ordinary: ['code', 'value-concept'] },
      { rows: 'component-code-value-concept' },
    ],
  },
};

/**
 * Where the built-in composite `code` of `resourceType` is read from; undefined when from its own `<code>$<k>` rows
 * (every other composite, and a project's own SearchParameters, whose index codes are never these).
 */
export function compositeSources(resourceType: string, code: string): readonly CompositeSource[] | undefined {
  return SOURCES[resourceType]?.[code];
}

/** The composites of a resource type that are written without rows of their own. */
export function derivedComposites(resourceType: string): ReadonlySet<string> {
  return DERIVED.get(resourceType) ?? NONE;
}

const NONE: ReadonlySet<string> = new Set();
const DERIVED = new Map(Object.entries(SOURCES).map(([t, byCode]) => [t, new Set(Object.keys(byCode))]));
