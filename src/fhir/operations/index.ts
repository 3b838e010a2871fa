// Every FHIR operation Cinder offers, as data (ARCHITECTURE habit 4): the HTTP routes (src/http/routes/operations.ts)
// and the CapabilityStatement are derived from this list.
import { auditVerifyChainOperation } from './audit-verify-chain.js';
import { cancelOperation } from './cancel.js';
import { codeSystemLookupInstanceOperation, codeSystemLookupOperation } from './codesystem-lookup.js';
import { codeSystemSubsumesInstanceOperation, codeSystemSubsumesOperation } from './codesystem-subsumes.js';
import {
  codeSystemValidateCodeInstanceOperation,
  codeSystemValidateCodeOperation,
} from './codesystem-validate-code.js';
import {
  conceptMapTranslateInstanceOperation,
  conceptMapTranslateOperation,
} from './conceptmap-translate.js';
import { csvOperation } from './csv.js';
import { everythingOperation } from './everything.js';
import { exportOperations } from './export.js';
import { expungeOperation } from './expunge.js';
import { getWsBindingTokenOperation } from './get-ws-binding-token.js';
import { launchOperation } from './launch.js';
import type { OperationDefinition } from './operation.js';
import { reindexOperation } from './reindex.js';
import { testNotificationOperation } from './test-notification.js';
import { subscriptionEventsOperation } from './subscription-events.js';
import { subscriptionStatusOperation } from './subscription-status.js';
import { validateInstanceOperation, validateOperation } from './validate.js';
import { valueSetExpandInstanceOperation, valueSetExpandOperation } from './valueset-expand.js';
import {
  valueSetValidateCodeInstanceOperation,
  valueSetValidateCodeOperation,
} from './valueset-validate-code.js';
import { viewDefinitionExportOperation } from './viewdefinition-export.js';
import { viewDefinitionRunOperations } from './viewdefinition-run.js';

export const OPERATIONS: readonly OperationDefinition[] = [
  ...exportOperations,
  reindexOperation,
  expungeOperation,
  cancelOperation,
  csvOperation,
  validateOperation,
  validateInstanceOperation,
  everythingOperation,
  ...viewDefinitionRunOperations,
  viewDefinitionExportOperation,
  testNotificationOperation,
  subscriptionStatusOperation,
  subscriptionEventsOperation,
  getWsBindingTokenOperation,
  auditVerifyChainOperation,
  launchOperation,
  // Terminology (API.md §9), each at type and instance level.
  valueSetExpandOperation,
  valueSetExpandInstanceOperation,
  valueSetValidateCodeOperation,
  valueSetValidateCodeInstanceOperation,
  codeSystemLookupOperation,
  codeSystemLookupInstanceOperation,
  codeSystemValidateCodeOperation,
  codeSystemValidateCodeInstanceOperation,
  codeSystemSubsumesOperation,
  codeSystemSubsumesInstanceOperation,
  conceptMapTranslateOperation,
  conceptMapTranslateInstanceOperation,
];
