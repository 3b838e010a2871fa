// Storage errors that clients can cause, as FhirErrors: unique constraints they run into. Used by the HTTP error
// handler and by batch entries (which answer each entry on its own).
import { violatedConstraint } from '../../storage/db.js';
import { FhirError } from '../outcome.js';

export function storageErrorToFhir(err: unknown): FhirError | undefined {
  const constraint = violatedConstraint(err);
  if (constraint === undefined) return undefined;
  if (constraint === 'resources_membership_external_id') {
    return new FhirError(
      'duplicate',
      'A ProjectMembership with this externalId already exists',
      'membership.external-id-taken',
    );
  }
  return new FhirError(
    'conflict',
    'A concurrent request wrote the same resource; retry',
    'storage.concurrent-write',
  );
}
