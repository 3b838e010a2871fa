// Full text (API.md §11 "Search"): `sp_text` holds, per current resource version, the distinct words of its narrative
// and of its whole content as tsvectors (folded and cut in JS by src/fhir/search/full-text.ts), each with a GIN
// index, for `_text` and `_content`. And token `:text` (CodeableConcept.text, Coding.display, Identifier.type.text)
// is answered by prefix from a btree on the token table's normalised text (it read every token row before).
// Resources written before this migration get their words when written again or by `$reindex`.
// https://hl7.org/fhir/R4/search.html#text, https://hl7.org/fhir/R4/search.html#modifiers
export const version = 19;
export const sql = `
CREATE TABLE sp_text (
  rid bigint NOT NULL,
  resource_type text NOT NULL,
  narrative tsvector,
  content tsvector
);
CREATE INDEX sp_text_rid ON sp_text (rid);
CREATE INDEX sp_text_narrative ON sp_text USING gin (narrative);
CREATE INDEX sp_text_content ON sp_text USING gin (content);
CREATE INDEX sp_token_text ON sp_token (resource_type, code, text_norm text_pattern_ops, rid) WHERE text_norm IS NOT NULL;
`;
