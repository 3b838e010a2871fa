// Binary securityContext rule of the access module: role × scopes × referenced type (HTTP cases: test/api/binary-access).
import { describe, expect, it } from 'vitest';
import { assertSecurityContextRead, type Actor } from './access.js';
import { FhirError } from './outcome.js';

const member: Actor = { projectId: 'p', projectAdmin: false, superAdmin: false };
const admin: Actor = { ...member, projectAdmin: true };
const binaryOnly: Actor = { ...member, scopes: [{ type: 'Binary', permissions: 'rs' }] };
const withPatient: Actor = {
  ...binaryOnly,
  scopes: [...(binaryOnly.scopes ?? []), { type: 'Patient', permissions: 'r' }],
};

describe('assertSecurityContextRead', () => {
  it.each([
    [member, undefined, true],
    [member, { reference: 'Patient/1' }, true],
    [member, { reference: 'ClientApplication/c' }, false],
    [admin, { reference: 'ClientApplication/c' }, true],
    [binaryOnly, { reference: 'Patient/1' }, false],
    [binaryOnly, { reference: 'http://other.example/fhir/Patient/1/_history/2' }, false],
    [binaryOnly, { reference: '#contained' }, true],
    [binaryOnly, { display: 'no reference' }, true],
    [withPatient, { reference: 'Patient/1' }, true],
  ] as const)('%j reading under %j: %s', (actor, context, allowed) => {
    const run = (): void => assertSecurityContextRead(actor, context);
    if (allowed) expect(run).not.toThrow();
    else expect(run).toThrow(FhirError);
  });
});
