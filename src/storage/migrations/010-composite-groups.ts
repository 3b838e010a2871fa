// Composite search parameters (`code-value-quantity`, `component-code-value-quantity`, ...): their components are
// index rows of the ordinary tables, under `<code>$<k>`, and `grp` numbers the element (the Observation, each of its
// components) they were found in, so a search joins components of the same element. Null on every other row.
// Resources written before this migration get composite rows when written again or by `$reindex`.
// https://hl7.org/fhir/R4/search.html#composite
export const version = 10;
export const sql = `
ALTER TABLE sp_string ADD COLUMN grp integer;
ALTER TABLE sp_token ADD COLUMN grp integer;
ALTER TABLE sp_reference ADD COLUMN grp integer;
ALTER TABLE sp_date ADD COLUMN grp integer;
ALTER TABLE sp_number ADD COLUMN grp integer;
ALTER TABLE sp_quantity ADD COLUMN grp integer;
ALTER TABLE sp_uri ADD COLUMN grp integer;
`;
