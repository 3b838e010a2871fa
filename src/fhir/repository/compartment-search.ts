// Compartment search, GET {fhir}/<Compartment>/<id>/<Type>?… (https://hl7.org/fhir/R4/compartmentdefinition.html,
// https://hl7.org/fhir/R4/http.html#vsearch): a search of <Type> kept to the resources the R4 CompartmentDefinition of
// <Compartment> puts in that compartment (Patient, Encounter, RelatedPerson, Practitioner, Device). The compartment's
// own resource must exist for the caller; a type the compartment does not hold is 400.
import type { Queryable } from '../../storage/db.js';
import { compartmentParams, isCompartment } from '../definitions/compartments.js';
import { isResourceType } from '../definitions/index.js';
import { FhirError } from '../outcome.js';
import type { FhirResult } from '../result.js';
import type { RepoContext } from './context.js';
import { readVisibleRow } from './read.js';
import { searchResources } from './search.js';

export async function searchCompartment(
  db: Queryable,
  ctx: RepoContext,
  compartment: string,
  id: string,
  resourceType: string,
  query: Record<string, string | string[] | undefined>,
  selfUrl: string,
): Promise<FhirResult> {
  if (!isCompartment(compartment) || !isResourceType(resourceType))
    throw new FhirError(
      'not-found',
      `Unknown path: ${compartment.slice(0, 64)}/<id>/${resourceType.slice(0, 64)}`,
      'rest.compartment-unknown',
    );
  const params = compartmentParams(compartment, resourceType);
  if (params.length === 0)
    throw new FhirError(
      'invalid',
      `The ${compartment} compartment holds no ${resourceType} resources`,
      'rest.compartment-type',
    );
  const owner = await readVisibleRow(db, ctx, compartment, id);
  if (!owner || owner.deleted)
    throw new FhirError(
      'not-found',
      `Not found: ${compartment}/${id.slice(0, 64)}`,
      'rest.compartment-not-found',
    );
  return searchResources(db, ctx, resourceType, query, selfUrl, {
    compartment: { type: compartment, id, params },
  });
}
