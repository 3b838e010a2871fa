// The body of an operation invoked by POST (https://hl7.org/fhir/R4/operations.html#request,
// https://hl7.org/fhir/R4/parameters.html): absent, or a Parameters resource whose `parameter` is a list of objects,
// each with a `name`, a `resource` that is a JSON object when given, and `part`s of the same shape. Anything else is
// refused with 400 instead of being ignored (issue 25 point 1: a mistyped body was answered 200 or 202 as if it had
// been read), so a client learns that what it sent was not understood.
import { FhirError } from '../outcome.js';

type Json = Record<string, unknown>;

/** One parameter, its shape checked: a string name; `resource` a JSON object; `part` a list of parameters. */
export type ParameterJson = Json & { name: string; resource?: Json; part?: ParameterJson[] };

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The parameters of a POST body (none when there is no body); 400 with `code` naming the first element of the wrong
 * type. The walk into `part` recurses, within the body's bound (json/parse.ts MAX_BODY_DEPTH).
 */
export function parametersOf(body: unknown, code: string): ParameterJson[] {
  if (body === undefined) return [];
  if (!isObject(body) || body.resourceType !== 'Parameters')
    throw new FhirError('invalid', 'The request body must be a Parameters resource', code);
  if (body.parameter === undefined) return [];
  checkList(body.parameter, 'Parameters.parameter', code);
  return body.parameter as ParameterJson[];
}

function checkList(list: unknown, at: string, code: string): void {
  const bad = (what: string, where: string) =>
    new FhirError('invalid', `The request body must be a Parameters resource: ${what}`, code, {
      expression: [where],
    });
  if (!Array.isArray(list)) throw bad(`${at} must be a list`, at);
  list.forEach((p: unknown, i) => {
    const here = `${at}[${i}]`;
    if (!isObject(p)) throw bad(`${here} must be an object`, here);
    if (typeof p.name !== 'string') throw bad(`${here}.name must be a string`, `${here}.name`);
    if (p.resource !== undefined && !isObject(p.resource))
      throw bad(`${here}.resource must be a resource (a JSON object)`, `${here}.resource`);
    if (p.part !== undefined) checkList(p.part, `${here}.part`, code);
  });
}
