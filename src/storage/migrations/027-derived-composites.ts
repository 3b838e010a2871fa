// Composites read from rows the index holds anyway (issue 30, fewer bytes per resource): Observation's
// `code-value-quantity`, `code-value-concept`, `combo-code-value-quantity` and `combo-code-value-concept` are answered
// from the resource's ordinary `code`, `value-quantity` and `value-concept` rows and, for an Observation's components,
// from the `component-code-value-*` rows (src/fhir/search/composite-sources.ts). Their own `<code>$<k>` rows
// (migration 010) are written no more; the existing ones are deleted here. Each DELETE reads the value index's range
// of one (type, code) pair. PostgreSQL reuses the space for new rows; `VACUUM FULL sp_token, sp_quantity` at a quiet
// time gives it back to the file system (it locks both tables while it runs).
// https://hl7.org/fhir/R4/search.html#composite
export const version = 27;
export const sql = `
DELETE FROM sp_token WHERE resource_type = 'Observation' AND code IN (
  'code-value-quantity$0', 'code-value-concept$0', 'code-value-concept$1',
  'combo-code-value-quantity$0', 'combo-code-value-concept$0', 'combo-code-value-concept$1');
DELETE FROM sp_quantity WHERE resource_type = 'Observation' AND code IN (
  'code-value-quantity$1', 'combo-code-value-quantity$1');
`;
