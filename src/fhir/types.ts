// Shared FHIR value types used across fhir/, auth/ and jobs/.

export interface Meta {
  versionId?: string;
  lastUpdated?: string;
  /** Cinder: the bare id of the project that owns the resource. */
  project?: string;
  [key: string]: unknown;
}

export interface Resource {
  resourceType: string;
  id?: string;
  meta?: Meta;
  [key: string]: unknown;
}

export interface Reference {
  reference?: string;
  display?: string;
  [key: string]: unknown;
}

/** What a caller may see: one project's resources, or (super administrators) every project's. */
export interface AccessScope {
  /** null: every project (super administrator). */
  projectId: string | null;
  /** Only resources whose `meta.author.reference` is this (a member searching the AsyncJobs they started). */
  author?: string;
  /**
   * Only this ProjectMembership among ProjectMemberships, whether searched or included (a member's own; fhir/access.ts
   * membershipReach). Other types are not narrowed by it.
   */
  membership?: string;
  /**
   * Only resources that are the `profile` of a live, active ProjectMembership of their own project (the profiles an
   * external identity's fhirUser search may find, API.md §4).
   */
  memberProfiles?: boolean;
  /**
   * Only resources in this Patient's compartment (https://hl7.org/fhir/R4/compartmentdefinition-patient.html),
   * except those of the `unlimited` types: a token whose reads come from `patient/` scopes (fhir/access.ts
   * patientReach).
   */
  patient?: { id: string; unlimited: readonly string[] };
}
