// Validation against profiles (API.md §9). (Skeleton: every profile is unknown until the validator lands.)
import type { OperationOutcomeIssue } from '../../outcome.js';
import type { ConformanceResolver, ProfileValidator, Terminology } from '../model.js';

export function createProfileValidator(_deps: {
  resolver: ConformanceResolver;
  terminology: Terminology;
}): ProfileValidator {
  return {
    async validate(_projectId, _resource, profiles) {
      return profiles.map((p): OperationOutcomeIssue => ({
        severity: p.explicit ? 'error' : 'warning',
        code: 'not-found',
        details: { text: `Unknown profile ${p.canonical.slice(0, 200)}` },
        expression: ['profile'],
      }));
    },
  };
}
