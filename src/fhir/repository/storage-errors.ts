// Storage errors that clients can cause, as FhirErrors: unique constraints they run into, and values the database
// cannot hold or compare. Used by the HTTP error handler and by batch entries (which answer each entry on its own).
import { sqlState, violatedConstraint } from '../../storage/db.js';
import { FhirError } from '../outcome.js';

/**
 * SQLSTATE data exceptions that only a request's own values cause (every query is parameterised): a NUL character
 * or an unpaired surrogate in a string or id (22021, 22P05, 22P02 for JSON), a forged `_cursor` key that is no
 * timestamp or number (22007, 22008, 22P02, 22003). Found by test/api/hostile-input.test.ts; they were 500s.
 */
const BAD_VALUE = new Set(['22021', '22P05', '22P02', '22007', '22008', '22003']);

/** `query_canceled`: on PostgreSQL, a request's statement ran past the pool's statement_timeout (issue 12). */
const STATEMENT_TIMEOUT = '57014';

export function storageErrorToFhir(err: unknown): FhirError | undefined {
  if (sqlState(err) === STATEMENT_TIMEOUT) {
    return new FhirError(
      'timeout',
      'The database query took longer than the statementTimeout limit; narrow the request, or retry later',
      'storage.statement-timeout',
      { status: 503, headers: { 'retry-after': '5' } },
    );
  }
  if (BAD_VALUE.has(sqlState(err) ?? '')) {
    return new FhirError(
      'invalid',
      'The request holds a value that cannot be stored or compared (e.g. a NUL character, an unpaired surrogate or a malformed _cursor)',
      'storage.bad-value',
    );
  }
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
