// Identifier index rows the token and reference tables cannot hold (API.md §9, issue 27): for `:of-type`, each type
// coding of an identifier with its value (`identifier:of-type=<type system>|<type code>|<value>`), and for reference
// `:identifier`, the `identifier` of a Reference (`subject:identifier=<system>|<value>`); `code` is the parameter.
// Resources written before this migration get these rows when written again or by `$reindex`.
// https://hl7.org/fhir/R4/search.html#token, https://hl7.org/fhir/R4/search.html#reference
export const version = 17;
export const sql = `
CREATE TABLE sp_identifier (
  rid bigint NOT NULL,
  resource_type text NOT NULL,
  code text NOT NULL,
  system text,
  value text NOT NULL,
  type_system text,
  type_code text,
  grp integer
);
CREATE INDEX sp_identifier_value ON sp_identifier (resource_type, code, value, system, type_code, rid);
CREATE INDEX sp_identifier_rid ON sp_identifier (rid);
`;
