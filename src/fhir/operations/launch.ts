// POST {fhir}/ClientApplication/<id>/$launch, the start of a SMART EHR launch (API.md §11, SMART App Launch 2.x
// https://hl7.org/fhir/smart-app-launch/app-launch.html#launch-app-ehr-launch): records a launch context (a patient,
// optionally an encounter) for one client and answers the opaque `launch` value and the client's `launchUri` with
// `iss` and `launch`; the authorize endpoint consumes it once, within five minutes (src/auth/smart-launch.ts).
import type { FhirContextItem } from '../../auth/smart-launch.js';
import type { Queryable } from '../../storage/db.js';
import { assertLaunch } from '../access.js';
import { r4ResourceTypes } from '../definitions/index.js';
import { parseJson } from '../json/parse.js';
import { FhirError } from '../outcome.js';
import { visible } from '../repository/context.js';
import { readLiveRow } from '../repository/read.js';
import { generateSecret, sha256 } from '../repository/secrets.js';
import { selectCurrent, type StoredRow } from '../repository/store.js';
import type { FhirResult } from '../result.js';
import type { Resource } from '../types.js';
import type { OperationDefinition, OperationInput } from './operation.js';
import { parametersOf, type ParameterJson } from './parameters-body.js';

/** How long a launch may be used (seconds): API.md §11 "valid 5 minutes". */
export const LAUNCH_LIFETIME = 300;

const ID = '[A-Za-z0-9\\-.]{1,64}';

/** How many `fhirContext` resources one launch may name. */
export const MAX_FHIR_CONTEXT = 10;

const bad = (text: string, code: string, expression?: string): FhirError =>
  new FhirError('invalid', text, `launch.${code}`, expression ? { expression: [expression] } : {});

/** The id a `valueReference` parameter names, as `Type/id` or `{fhir}/Type/id`; undefined when absent. */
function referenceParam(
  params: ParameterJson[],
  name: string,
  type: string,
  fhirBase: string,
): string | undefined {
  const found = params.filter((p) => p.name === name);
  if (found.length === 0) return undefined;
  if (found.length > 1) throw bad(`The parameter ${name} must be given once`, 'repeated', name);
  const value = (found[0] as ParameterJson).valueReference as { reference?: unknown } | undefined;
  const ref = typeof value === 'object' && value !== null ? value.reference : undefined;
  if (typeof ref !== 'string')
    throw bad(`The parameter ${name} must be a valueReference with a reference`, 'reference', name);
  const local = ref.startsWith(`${fhirBase}/`) ? ref.slice(fhirBase.length + 1) : ref;
  const m = new RegExp(`^${type}/(${ID})$`).exec(local);
  if (!m) throw bad(`The parameter ${name} must reference a ${type} (${type}/<id>)`, 'reference-type', name);
  return m[1] as string;
}

let r4Types: ReadonlySet<string> | undefined;
const badContext = (text: string, code: string): FhirError =>
  bad(text, `fhir-context-${code}`, 'fhirContext');

/**
 * The `fhirContext` parameters (`valueReference`, repeatable): each a resource of an R4 type as `Type/id` or
 * `{fhir}/Type/id`, neither Patient nor Encounter (SMART keeps those in `patient` and `encounter`), none twice.
 */
function fhirContextParams(params: ParameterJson[], fhirBase: string): { type: string; id: string }[] {
  const found = params.filter((p) => p.name === 'fhirContext');
  if (found.length > MAX_FHIR_CONTEXT)
    throw badContext(`At most ${MAX_FHIR_CONTEXT} fhirContext parameters may be given`, 'count');
  const types = (r4Types ??= new Set(r4ResourceTypes()));
  const seen = new Set<string>();
  return found.map((p) => {
    const value = p.valueReference as { reference?: unknown } | undefined;
    const ref = typeof value === 'object' && value !== null ? value.reference : undefined;
    if (typeof ref !== 'string' || ref.length > 300)
      throw badContext('Each fhirContext must be a valueReference with a reference', 'reference');
    const local = ref.startsWith(`${fhirBase}/`) ? ref.slice(fhirBase.length + 1) : ref;
    const m = new RegExp(`^([A-Za-z]{1,64})/(${ID})$`).exec(local);
    const [type, id] = [m?.[1] ?? '', m?.[2] ?? ''];
    if (!types.has(type))
      throw badContext(
        `The fhirContext ${local} is not a reference to a FHIR resource (Type/id)`,
        'reference',
      );
    if (type === 'Patient' || type === 'Encounter')
      throw badContext(
        `A ${type} is given as the ${type.toLowerCase()} parameter, not in fhirContext`,
        'type',
      );
    if (seen.has(`${type}/${id}`))
      throw badContext(`The fhirContext ${type}/${id} is given twice`, 'repeated');
    seen.add(`${type}/${id}`);
    return { type, id };
  });
}

function launchUrl(client: StoredRow, fhirBase: string, launch: string): string {
  const launchUri = (parseJson(client.json) as Resource).launchUri;
  if (typeof launchUri !== 'string' || !URL.canParse(launchUri) || !/^https?:/i.test(launchUri)) {
    throw bad(
      `ClientApplication/${client.id} has no launchUri (an absolute http or https URL) to launch`,
      'no-launch-uri',
    );
  }
  const url = new URL(launchUri);
  url.searchParams.set('iss', fhirBase);
  url.searchParams.set('launch', launch);
  return url.toString();
}

/** The User whose membership the caller acts through, when it is one: only that user may use the launch. */
async function creatorUser(db: Queryable, membershipId: string | undefined) {
  if (!membershipId) return null;
  const row = await selectCurrent(db, 'ProjectMembership', membershipId);
  const user = row ? (parseJson(row.json) as { user?: { reference?: unknown } }).user?.reference : undefined;
  const m = typeof user === 'string' ? /^User\/(.+)$/.exec(user) : null;
  return m ? (m[1] as string) : null;
}

async function launch(db: Queryable, i: OperationInput): Promise<FhirResult> {
  const { ctx } = i;
  assertLaunch(ctx.actor, ctx.author);
  const client = await selectCurrent(db, 'ClientApplication', i.id);
  if (!client || client.deleted || !visible(ctx, client.project_id)) {
    throw new FhirError('not-found', `Not found: ClientApplication/${i.id}`, 'launch.client-not-found');
  }
  const params = parametersOf(i.request.body, 'launch.body');
  const patientId = referenceParam(params, 'patient', 'Patient', ctx.fhirBase);
  if (patientId === undefined)
    throw bad('The parameter patient (valueReference) is required', 'no-patient', 'patient');
  const encounterId = referenceParam(params, 'encounter', 'Encounter', ctx.fhirBase);
  const contextRefs = fhirContextParams(params, ctx.fhirBase);
  const value = generateSecret();
  const url = launchUrl(client, ctx.fhirBase, value);
  // A super administrator reads every project; the launch still stays in the client's.
  const outside = (row: StoredRow) => row.project_id !== client.project_id;
  const patient = await readLiveRow(db, ctx, 'Patient', patientId);
  if (outside(patient))
    throw new FhirError('not-found', `Not found: Patient/${patientId}`, 'launch.patient-project');
  if (encounterId !== undefined) {
    const encounter = await readLiveRow(db, ctx, 'Encounter', encounterId);
    if (outside(encounter))
      throw new FhirError('not-found', `Not found: Encounter/${encounterId}`, 'launch.encounter-project');
    const subject = (parseJson(encounter.json) as { subject?: { reference?: unknown } }).subject?.reference;
    if (subject !== `Patient/${patientId}`) {
      throw bad(
        `Encounter/${encounterId} is not an encounter of Patient/${patientId}`,
        'encounter-patient',
        'encounter',
      );
    }
  }
  const fhirContext: FhirContextItem[] = [];
  for (const { type, id } of contextRefs) {
    // Read with the caller's access, then held to the client's project, as the patient is.
    const row = await readLiveRow(db, ctx, type, id);
    if (outside(row))
      throw new FhirError('not-found', `Not found: ${type}/${id}`, 'launch.fhir-context-project');
    fhirContext.push({ reference: `${type}/${id}` });
  }
  const now = ctx.clock();
  await db.query('DELETE FROM smart_launches WHERE expires_at < $1', [new Date(now.getTime() - 3600_000)]);
  await db.query(
    `INSERT INTO smart_launches (launch_hash, client_id, project_id, user_id, patient, encounter, created_at, expires_at,
       fhir_context) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb)`,
    [
      sha256(value),
      client.id,
      client.project_id,
      await creatorUser(db, ctx.actor.membershipId),
      patientId,
      encounterId ?? null,
      now,
      new Date(now.getTime() + LAUNCH_LIFETIME * 1000),
      fhirContext.length > 0 ? JSON.stringify(fhirContext) : null,
    ],
  );
  return {
    status: 200,
    body: {
      resourceType: 'Parameters',
      parameter: [
        { name: 'launch', valueString: value },
        { name: 'launch-url', valueUrl: url },
      ],
    },
  };
}

export const launchOperation: OperationDefinition = {
  code: 'launch',
  level: 'instance',
  types: ['ClientApplication'],
  affectsState: true,
  run: (env, i) => launch(env.db, i),
};
