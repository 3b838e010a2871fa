// Resource content is stored as `json` (the text as written) instead of `jsonb`, whose numeric form rewrites
// exponents (`1.0e2` becomes `100`): FHIR decimals keep the text they were sent with
// (https://hl7.org/fhir/R4/datatypes.html#decimal). `content::text` is then the stored text itself, with no
// conversion on read. Rows written before keep the text jsonb gives them (`{"a": 1.50}`, spaces included): jsonb
// kept trailing zeros and long values, so only exponents written before this migration are lost. The expression
// indexes on content (migration 003) are rebuilt by PostgreSQL with the json operators.
export const version = 11;
export const sql = `
ALTER TABLE resources ALTER COLUMN content TYPE json USING content::json;
ALTER TABLE resource_history ALTER COLUMN content TYPE json USING content::json;
`;
