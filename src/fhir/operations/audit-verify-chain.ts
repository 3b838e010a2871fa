// GET or POST {fhir}/AuditEvent/$verify-chain (issue 28 point 5, https://hl7.org/fhir/R4/operations.html): verifies a
// project's audit hash chain (src/audit/chain.ts) and answers a Parameters resource: `valid`, `checked`, `head` (the
// last link's hash, when there is one) and, when broken, `brokenAt` (AuditEvent/<id>), `chainNo` and `reason`.
// Parameter `project` (query string or Parameters body): a project id, or `_none` for the chain of requests made
// without a login; default the caller's project. A project admin verifies its own project, a super administrator any.
// Sealing the rows not yet sealed first is housekeeping, not a change a client asks for: the operation is a read.
import { createAuditChain } from '../../audit/chain.js';
import type { ChainVerification } from '../../audit/model.js';
import { assertAuditChainAccess, assertRead } from '../access.js';
import { isValidId } from '../id.js';
import { FhirError } from '../outcome.js';
import type { FhirResult } from '../result.js';
import type { Resource } from '../types.js';
import type { OperationDefinition, OperationEnv, OperationInput } from './operation.js';
import { parametersOf } from './parameters-body.js';

/** The `project` value naming the chain of requests without a login (project ''): not a FHIR id, so never a project's. */
export const NO_PROJECT = '_none';

const invalid = (text: string, code: string): FhirError =>
  new FhirError('invalid', text, `audit-verify-chain.${code}`, { expression: ['project'] });

/** The `project` parameter's values, from the query string and a Parameters body. */
function projectValues(i: OperationInput): unknown[] {
  const values: unknown[] = [i.request.query.project].flat().filter((v) => v !== undefined);
  for (const p of parametersOf(i.request.body, 'audit-verify-chain.body')) {
    if (p.name !== 'project') continue;
    const key = Object.keys(p).find((k) => k.startsWith('value'));
    values.push(key ? p[key] : undefined);
  }
  return values;
}

/** The project whose chain is asked for: the caller's by default. */
export function askedProject(i: OperationInput): string {
  const values = projectValues(i);
  if (values.length === 0) return i.ctx.actor.projectId;
  if (values.length > 1) throw invalid('$verify-chain takes one project', 'project-repeated');
  const v = values[0];
  if (typeof v !== 'string')
    throw invalid('project must be a project id (a string), or _none', 'project-type');
  if (v === NO_PROJECT) return '';
  if (!isValidId(v))
    throw invalid(`project must be a project id, or ${NO_PROJECT}: ${v.slice(0, 64)}`, 'project-malformed');
  return v;
}

/** The answer as a FHIR Parameters resource. */
export function verificationParameters(v: ChainVerification): Resource {
  const parameter: Record<string, unknown>[] = [
    { name: 'valid', valueBoolean: v.valid },
    { name: 'checked', valueInteger: v.checked },
  ];
  if (v.head !== undefined) parameter.push({ name: 'head', valueString: v.head });
  if (v.broken) {
    if (v.broken.id !== '')
      parameter.push({ name: 'brokenAt', valueReference: { reference: `AuditEvent/${v.broken.id}` } });
    parameter.push({ name: 'chainNo', valueInteger: v.broken.chainNo });
    parameter.push({ name: 'reason', valueString: v.broken.reason });
  }
  return { resourceType: 'Parameters', parameter };
}

async function verifyChain(env: OperationEnv, i: OperationInput): Promise<FhirResult> {
  assertRead(i.ctx.actor, 'AuditEvent', 'read');
  const projectId = askedProject(i);
  assertAuditChainAccess(i.ctx.actor, projectId);
  const result = await createAuditChain(env.db).verify(projectId);
  return { status: 200, body: verificationParameters(result) };
}

export const auditVerifyChainOperation: OperationDefinition = {
  code: 'verify-chain',
  level: 'type',
  types: ['AuditEvent'],
  affectsState: false,
  run: verifyChain,
};
