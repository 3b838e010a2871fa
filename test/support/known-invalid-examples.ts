// Official HL7 R4 examples that break R4's own rules, with the exact issues Cinder's validator reports.
// Both the validator's unit test and the HTTP examples test assert that exactly these are refused.
const missingSearchParameterBase = ["required SearchParameter.base: Missing required element 'base'"];
const missingIgNameStatus = [
  "required ImplementationGuide.name: Missing required element 'name'",
  "required ImplementationGuide.status: Missing required element 'status'",
];

/**
 * Official R4 examples that are invalid per the R4 spec, with their exact issues. The test asserts that exactly
 * these fail, with exactly these issues.
 */
export const KNOWN_BAD_EXAMPLES: Record<string, string[]> = {
  // The FHIR core package's own ImplementationGuide has no `name` and no `status` (both 1..1).
  'ImplementationGuide-fhir.json': missingIgNameStatus,
  'ig-r4.json': missingIgNameStatus, // same resource, other file name
  // Extension search parameters generated without `base` (1..*).
  'SearchParameter-codesystem-extensions-CodeSystem-author.json': missingSearchParameterBase,
  'SearchParameter-codesystem-extensions-CodeSystem-effective.json': missingSearchParameterBase,
  'SearchParameter-codesystem-extensions-CodeSystem-end.json': missingSearchParameterBase,
  'SearchParameter-codesystem-extensions-CodeSystem-keyword.json': missingSearchParameterBase,
  'SearchParameter-codesystem-extensions-CodeSystem-workflow.json': missingSearchParameterBase,
  'SearchParameter-valueset-extensions-ValueSet-author.json': missingSearchParameterBase,
  'SearchParameter-valueset-extensions-ValueSet-effective.json': missingSearchParameterBase,
  'SearchParameter-valueset-extensions-ValueSet-end.json': missingSearchParameterBase,
  'SearchParameter-valueset-extensions-ValueSet-keyword.json': missingSearchParameterBase,
  'SearchParameter-valueset-extensions-ValueSet-workflow.json': missingSearchParameterBase,
  // The id has 67 characters; an id is at most 64.
  'SearchParameter-questionnaireresponse-extensions-QuestionnaireResponse-item-subject.json': [
    "value SearchParameter.id: Invalid id: 'questionnaireresponse-extensions-QuestionnaireResponse-item-subject'",
  ],
  // Display-only nested items have no linkId (Questionnaire.item.linkId is 1..1): 32 items.
  'Questionnaire-qs1.json': Array.from({ length: 32 }, () => "Missing required element 'linkId'"),
};
