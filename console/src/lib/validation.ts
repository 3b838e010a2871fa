// What the resources page needs of $validate (API.md §9, https://hl7.org/fhir/R4/resource-operation-validate.html):
// the request (the resource, and the profile chosen, as a Parameters body) and its answer as rows for people.
import type { Resource } from './fhir.js';
import { issueText, type Issue } from './outcome.js';

export interface ValidationRow {
  severity: string;
  text: string;
  expression: string;
}

/** The Parameters body of `<Type>/<id>/$validate`: the resource, and the profile when one is chosen. */
export function validateBody(resource: Resource, profile: string): Resource {
  const parameter: Record<string, unknown>[] = [{ name: 'resource', resource }];
  const p = profile.trim();
  if (p) parameter.push({ name: 'profile', valueUri: p });
  return { resourceType: 'Parameters', parameter };
}

const ORDER: Record<string, number> = { fatal: 0, error: 1, warning: 2, information: 3 };

/** The issues of an OperationOutcome, most severe first; an answer that is not one gives no rows. */
export function validationRows(outcome: unknown): ValidationRow[] {
  const o = outcome as { resourceType?: string; issue?: Issue[] } | null;
  if (!o || o.resourceType !== 'OperationOutcome' || !Array.isArray(o.issue)) return [];
  return o.issue
    .map((i) => ({
      severity: i.severity ?? 'error',
      text: issueText(i),
      expression: (i.expression ?? []).join(', '),
    }))
    .sort((a, b) => (ORDER[a.severity] ?? 9) - (ORDER[b.severity] ?? 9));
}

/** The profiles a resource declares, then the base profile of its type: the choices offered first. */
export function profileChoices(resource: Resource, known: readonly string[]): string[] {
  const declared = ((resource.meta as { profile?: unknown } | undefined)?.profile ?? []) as unknown[];
  const base = `http://hl7.org/fhir/StructureDefinition/${resource.resourceType}`;
  const all = [...declared.filter((p): p is string => typeof p === 'string'), base, ...known];
  return [...new Set(all)];
}
