// Helpers of the profile validator's unit tests: StructureDefinitions built in a line, a resolver over them per
// project, a Terminology that knows nothing, and a run of the validator.
import type { OperationOutcomeIssue } from '../../src/fhir/outcome.js';
import type { Resource } from '../../src/fhir/types.js';
import type { At, ConformanceResolver, Terminology } from '../../src/fhir/conformance/model.js';
import { createProfileValidator } from '../../src/fhir/conformance/profile/index.js';

export type Json = Record<string, unknown>;
export const P = 'http://example.org/StructureDefinition/';

/** A StructureDefinition of `type` with these snapshot elements after the root. */
export function sd(name: string, type: string, elements: Json[], rootExtra: Json = {}): Resource {
  return {
    resourceType: 'StructureDefinition',
    url: `${P}${name}`,
    type,
    snapshot: { element: [{ id: type, path: type, min: 0, max: '*', ...rootExtra }, ...elements] },
  };
}
export const el = (id: string, extra: Json = {}): Json => ({
  id,
  path: id.replace(/:[^.]+/g, ''),
  min: 0,
  max: '*',
  ...extra,
});

export function resolverOf(byProject: Record<string, Resource[]>): ConformanceResolver & { calls: number } {
  const r = {
    calls: 0,
    async resolve(at: At, _type: string, canonical: string) {
      r.calls++;
      const own = (byProject[at.projectId ?? ''] ?? []).find((x) => x.url === canonical);
      return own ?? (byProject.shared ?? []).find((x) => x.url === canonical);
    },
  };
  return r;
}

export const noTerminology: Terminology = {
  expand: async () => undefined,
  validateCode: async () => undefined,
  below: async () => undefined,
  above: async () => undefined,
};

export async function run(
  profiles: Resource[],
  resource: Json,
  name: string,
  terminology: Terminology = noTerminology,
): Promise<OperationOutcomeIssue[]> {
  const v = createProfileValidator({ resolver: resolverOf({ shared: profiles }), terminology });
  return v.validate({ projectId: 'p' }, resource as Resource, [{ canonical: `${P}${name}`, explicit: true }]);
}
export const errors = (issues: OperationOutcomeIssue[]): string[] =>
  issues.filter((i) => i.severity === 'error').map((i) => `${i.code} ${i.expression?.[0] ?? ''}`);
