// Error messages shown to people: OperationOutcome diagnostics first, then OAuth errors, then the status.
import { describe, expect, it } from 'vitest';
import { errorMessage, outcomeMessages } from './outcome.js';

describe('error messages', () => {
  it('shows every issue of an OperationOutcome, diagnostics or details, with its expression', () => {
    const body = {
      resourceType: 'OperationOutcome',
      issue: [
        {
          severity: 'error',
          code: 'invalid',
          diagnostics: "AsyncJob cannot be cancelled if status is not 'accepted'",
        },
        {
          severity: 'error',
          code: 'required',
          details: { text: 'Missing name' },
          expression: ['Patient.name'],
        },
        { severity: 'error', code: 'duplicate' },
      ],
    };
    expect(outcomeMessages(body)).toEqual([
      "AsyncJob cannot be cancelled if status is not 'accepted'",
      'Missing name (at Patient.name)',
      'duplicate',
    ]);
    expect(errorMessage(400, body).split('\n')).toHaveLength(3);
  });

  it('shows an OAuth error with its description, and the status when the body says nothing', () => {
    expect(errorMessage(400, { error: 'invalid_grant', error_description: 'The code has expired' })).toBe(
      'invalid_grant: The code has expired',
    );
    expect(errorMessage(403, undefined)).toBe('The server answered 403 Forbidden.');
    expect(errorMessage(0, undefined)).toBe('The server could not be reached.');
    expect(outcomeMessages({ resourceType: 'Patient' })).toEqual([]);
  });
});
