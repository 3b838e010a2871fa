// $validate (https://hl7.org/fhir/R4/operation-resource-validate.html, issue 14 point 2): POST {fhir}/<Type>/$validate
// and {fhir}/<Type>/<id>/$validate, with the resource as the body or a Parameters body (`resource`, `mode`
// create | update | delete, `profile`). Answers 200 with an OperationOutcome listing every issue with its
// `expression` (one informational issue when there is none); nothing is stored. Profiles (API.md §9): the resource's
// `meta.profile` entries (unknown: a warning) and the `profile` parameter (unknown: an error `not-found`), resolved in
// the caller's project then the shared set; the base profile of the type is always known.
import { assertWrite } from '../access.js';
import { isResourceType } from '../definitions/index.js';
import type { At } from '../conformance/model.js';
import { FhirError, type OperationOutcomeIssue } from '../outcome.js';
import { readVisibleRow } from '../repository/read.js';
import type { FhirResult } from '../result.js';
import type { Resource } from '../types.js';
import { tooDeepElement, MAX_RESOURCE_DEPTH } from '../validation/depth.js';
import { validateResource } from '../validation/validate.js';
import type { OperationDefinition, OperationEnv, OperationInput } from './operation.js';
import { parametersOf } from './parameters-body.js';

const MODES = ['create', 'update', 'delete'] as const;
type Mode = (typeof MODES)[number];
const BASE_PROFILE = 'http://hl7.org/fhir/StructureDefinition/';
/** meta.profile entries checked at most (a resource naming thousands would otherwise cost as many walks). */
const MAX_PROFILES = 20;

const error = (
  code: OperationOutcomeIssue['code'],
  text: string,
  expression: string,
): OperationOutcomeIssue => ({
  severity: 'error',
  code,
  details: { text },
  expression: [expression],
});

interface ValidateInput {
  resource?: unknown;
  mode?: Mode;
  profile?: string;
}

type Parameter = {
  name?: unknown;
  resource?: unknown;
  valueCode?: unknown;
  valueUri?: unknown;
  valueCanonical?: unknown;
};

/** The resource (the body itself, or the Parameters' `resource`), `mode` and `profile`. */
function readInput(body: unknown, query: Record<string, string | string[]>): ValidateInput {
  const first = (v: string | string[] | undefined): string | undefined => [v].flat()[0];
  const out: ValidateInput = {};
  let mode = first(query.mode);
  let profile = first(query.profile);
  const b = body as { resourceType?: unknown; parameter?: unknown } | undefined;
  if (b && typeof b === 'object' && b.resourceType === 'Parameters') {
    // Its shape checked (a `resource` that is not a JSON object is a 400, as for every operation).
    for (const p of parametersOf(b, 'validate.body') as Parameter[]) {
      if (p.name === 'resource') out.resource = p.resource;
      else if (p.name === 'mode' && typeof p.valueCode === 'string') mode = p.valueCode;
      else if (p.name === 'profile') {
        const v = p.valueCanonical ?? p.valueUri;
        if (typeof v === 'string') profile = v;
      }
    }
  } else if (b !== undefined && b !== null) out.resource = b;
  if (mode !== undefined) {
    if (!(MODES as readonly string[]).includes(mode))
      throw new FhirError(
        'invalid',
        `Unknown $validate mode: ${mode.slice(0, 32)} (create, update or delete)`,
        'validate.mode',
      );
    out.mode = mode as Mode;
  }
  if (profile !== undefined) out.profile = profile;
  return out;
}

const atOf = (i: OperationInput): At => ({ projectId: i.ctx.actor.projectId });

/** The resource's issues against the `profile` parameter (explicit) and its meta.profile entries. */
async function profileIssues(
  env: OperationEnv,
  i: OperationInput,
  resource: Resource,
  explicit: string | undefined,
): Promise<OperationOutcomeIssue[]> {
  const declared = (resource.meta as { profile?: unknown } | undefined)?.profile;
  const profiles = [
    ...(explicit !== undefined ? [{ canonical: explicit, explicit: true }] : []),
    ...(Array.isArray(declared) ? declared : [])
      .filter((p): p is string => typeof p === 'string')
      .slice(0, MAX_PROFILES)
      .map((canonical) => ({ canonical, explicit: false })),
  ];
  return profiles.length === 0 ? [] : env.conformance.profiles.validate(atOf(i), resource, profiles);
}

async function validate(env: OperationEnv, i: OperationInput): Promise<FhirResult> {
  if (!isResourceType(i.type))
    throw new FhirError('not-found', `Unknown resource type: ${i.type.slice(0, 64)}`, 'rest.unknown-type');
  const input = readInput(i.request.body, i.request.query);
  const instance = i.id !== '';
  if ((input.mode === 'update' || input.mode === 'delete') && !instance)
    throw new FhirError(
      'invalid',
      `$validate mode=${input.mode} needs a resource id in the URL`,
      'validate.mode-level',
    );
  const issues: OperationOutcomeIssue[] = [];
  if (input.mode === 'delete') {
    // Whether this caller could delete this resource now: it must exist for them, and they must be allowed to.
    const row = await readVisibleRow(env.db, i.ctx, i.type, i.id);
    if (!row || row.deleted)
      throw new FhirError('not-found', `Not found: ${i.type}/${i.id}`, 'validate.not-found');
    assertWrite(i.ctx.actor, i.type, 'delete');
  } else {
    const r = input.resource as { resourceType?: unknown; id?: unknown } | undefined;
    if (r === undefined)
      throw new FhirError(
        'invalid',
        '$validate needs a resource (the body, or the Parameters resource)',
        'validate.no-resource',
      );
    const deep = tooDeepElement(r, MAX_RESOURCE_DEPTH);
    if (deep !== undefined)
      throw new FhirError(
        'too-costly',
        `The resource nests deeper than ${MAX_RESOURCE_DEPTH} levels`,
        'validate.too-deep',
      );
    if (typeof r === 'object' && r !== null && r.resourceType !== i.type)
      issues.push(
        error(
          'invalid',
          `The resource type ${String(r.resourceType).slice(0, 64)} does not match the URL type ${i.type}`,
          'resourceType',
        ),
      );
    issues.push(...validateResource(r));
    if (input.mode === 'create' || input.mode === 'update') assertWrite(i.ctx.actor, i.type, input.mode);
    if (instance && typeof r === 'object' && r !== null && r.id !== i.id)
      issues.push(error('invalid', `The resource id must be ${i.id}, as in the URL`, `${i.type}.id`));
  }
  const r = input.resource;
  if (
    input.mode !== 'delete' &&
    typeof r === 'object' &&
    r !== null &&
    (r as Resource).resourceType === i.type
  )
    issues.push(...(await profileIssues(env, i, r as Resource, input.profile)));
  else if (input.profile !== undefined && input.profile !== `${BASE_PROFILE}${i.type}`)
    issues.push(
      ...(
        await env.conformance.profiles.validate(atOf(i), { resourceType: i.type }, [
          { canonical: input.profile, explicit: true },
        ])
      ).filter((x) => x.code === 'not-found'),
    );
  return {
    status: 200,
    body: {
      resourceType: 'OperationOutcome',
      issue:
        issues.length > 0
          ? issues
          : [{ severity: 'information', code: 'informational', details: { text: 'All OK' } }],
    },
  };
}

export const validateOperation: OperationDefinition = {
  code: 'validate',
  level: 'type',
  types: 'any',
  supports: isResourceType,
  affectsState: false,
  methods: ['POST'],
  definition: 'http://hl7.org/fhir/OperationDefinition/Resource-validate',
  run: validate,
};

export const validateInstanceOperation: OperationDefinition = { ...validateOperation, level: 'instance' };
