// Fewer bytes per resource in the search index (issue 30):
// - Composites read from rows the index holds anyway: Observation's `code-value-quantity`, `code-value-concept`,
//   `combo-code-value-quantity` and `combo-code-value-concept` are answered from the resource's ordinary `code`,
//   `value-quantity` and `value-concept` rows and, for an Observation's components, from the `component-code-value-*`
//   rows (src/fhir/search/composite-sources.ts). Their own `<code>$<k>` rows (migration 010) are written no more; the
//   existing ones are deleted here (each DELETE reads the value index's range of one (type, code) pair).
// - Union parameters (src/fhir/search/union-params.ts): Observation's `combo-code`, `combo-value-quantity`,
//   `combo-value-concept` and `combo-data-absent-reason` index exactly the values of `code` and `component-code`, ...:
//   their rows are written no more (queries read the parts' codes) and are deleted here.
// - Code system URIs are stored with a well-known prefix as one control character (src/fhir/search/system-key.ts):
//   the existing values of sp_token, sp_identifier and sp_quantity are rewritten here (every row with such a system).
// Both give the same answers. On an existing database the UPDATE writes a new version of most token rows (minutes and
// WAL on millions of rows) and the old versions' space is reused by PostgreSQL for new rows; `VACUUM FULL sp_token,
// sp_quantity, sp_identifier` at a quiet time gives the space back to the file system (it locks the tables while it
// runs).
// https://hl7.org/fhir/R4/search.html#composite, https://www.rfc-editor.org/rfc/rfc3986#section-2

/** The prefixes of system-key.ts as this migration encodes them (frozen: a later entry needs its own migration). */
export const PREFIXES = [
  'http://terminology.hl7.org/CodeSystem/',
  'http://hl7.org/fhir/sid/',
  'http://hl7.org/fhir/',
  'http://loinc.org',
  'http://snomed.info/sct',
  'http://unitsofmeasure.org',
  'http://www.nlm.nih.gov/research/umls/rxnorm',
  'urn:oid:',
  'urn:ietf:',
  'urn:iso:std:iso:',
  'https://',
  'http://',
] as const;

/** SQL: the stored form of column `c` (system-key.ts's systemKey). */
export function encoded(c: string): string {
  const cases = PREFIXES.map(
    (p, i) => `WHEN left(${c}, ${p.length}) = '${p}' THEN chr(${i + 1}) || substr(${c}, ${p.length + 1})`,
  );
  return `CASE WHEN ascii(${c}) BETWEEN 1 AND 31 THEN chr(31) || ${c} ${cases.join(' ')} ELSE ${c} END`;
}

/** Rewrites column `c` of `table` where its stored form differs. */
const rewrite = (table: string, c: string): string =>
  `UPDATE ${table} SET ${c} = ${encoded(c)} WHERE ${c} IS NOT NULL AND ${c} IS DISTINCT FROM ${encoded(c)};`;

export const version = 27;
export const sql = `
DELETE FROM sp_token WHERE resource_type = 'Observation' AND code IN (
  'code-value-quantity$0', 'code-value-concept$0', 'code-value-concept$1',
  'combo-code-value-quantity$0', 'combo-code-value-concept$0', 'combo-code-value-concept$1');
DELETE FROM sp_quantity WHERE resource_type = 'Observation' AND code IN (
  'code-value-quantity$1', 'combo-code-value-quantity$1');
DELETE FROM sp_token WHERE resource_type = 'Observation' AND code IN (
  'combo-code', 'combo-value-concept', 'combo-data-absent-reason');
DELETE FROM sp_quantity WHERE resource_type = 'Observation' AND code = 'combo-value-quantity';
${rewrite('sp_token', 'system')}
${rewrite('sp_quantity', 'system')}
${rewrite('sp_identifier', 'system')}
${rewrite('sp_identifier', 'type_system')}
`;
