// SMART `fhirContext` of an EHR launch (API.md §11, SMART App Launch 2.x
// https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html#fhir-context): the further resources a
// `ClientApplication/<id>/$launch` named, kept with the launch and then with the login it starts, as the JSON array the
// token response carries (`[{"reference": "Type/id"}, …]`); NULL when the launch named none.
export const version = 22;
export const sql = `
ALTER TABLE smart_launches ADD COLUMN fhir_context jsonb;
ALTER TABLE logins ADD COLUMN launch_fhir_context jsonb;
`;
