// Every FHIR operation Cinder offers, as data (ARCHITECTURE habit 4): the HTTP routes (src/http/routes/operations.ts)
// and the CapabilityStatement are derived from this list.
import { cancelOperation } from './cancel.js';
import { csvOperation } from './csv.js';
import { everythingOperation } from './everything.js';
import { exportOperations } from './export.js';
import { expungeOperation } from './expunge.js';
import { getWsBindingTokenOperation } from './get-ws-binding-token.js';
import type { OperationDefinition } from './operation.js';
import { reindexOperation } from './reindex.js';
import { testNotificationOperation } from './test-notification.js';
import { subscriptionEventsOperation } from './subscription-events.js';
import { subscriptionStatusOperation } from './subscription-status.js';
import { validateInstanceOperation, validateOperation } from './validate.js';
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
];
