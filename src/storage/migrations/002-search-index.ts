// Search index tables, one per search parameter type (as HAPI FHIR does), keyed by resources.rid.
// Each row is one value of one parameter (`code`) of one current resource version; src/fhir/search writes them
// in the transaction that writes the resource. No foreign key: rows are replaced by rid on every write, and
// whoever removes a resources row removes its index rows (deleteIndex). `_sort` reads min/max values from these
// same tables per rid (the (rid) indexes, also used by deletes and _include), so there is no separate sort table.
// Value indexes end in rid so that a parameter test is answered from the index alone (semi-join on rid).
export const version = 2;
export const sql = `
CREATE TABLE sp_string (
  rid bigint NOT NULL,
  resource_type text NOT NULL,
  code text NOT NULL,
  value_norm text NOT NULL,
  value_exact text NOT NULL
);
CREATE INDEX sp_string_value ON sp_string (resource_type, code, value_norm text_pattern_ops, rid);
CREATE INDEX sp_string_rid ON sp_string (rid);

CREATE TABLE sp_token (
  rid bigint NOT NULL,
  resource_type text NOT NULL,
  code text NOT NULL,
  system text,
  value text,
  text_norm text
);
CREATE INDEX sp_token_value ON sp_token (resource_type, code, value, system, rid);
CREATE INDEX sp_token_rid ON sp_token (rid);

CREATE TABLE sp_reference (
  rid bigint NOT NULL,
  resource_type text NOT NULL,
  code text NOT NULL,
  target_type text,
  target_id text,
  ref text NOT NULL
);
CREATE INDEX sp_reference_ref ON sp_reference (resource_type, code, ref, rid);
CREATE INDEX sp_reference_rid ON sp_reference (rid);

CREATE TABLE sp_date (
  rid bigint NOT NULL,
  resource_type text NOT NULL,
  code text NOT NULL,
  low timestamptz NOT NULL,
  high timestamptz NOT NULL
);
CREATE INDEX sp_date_value ON sp_date (resource_type, code, low, high, rid);
CREATE INDEX sp_date_rid ON sp_date (rid);

CREATE TABLE sp_number (
  rid bigint NOT NULL,
  resource_type text NOT NULL,
  code text NOT NULL,
  value numeric NOT NULL
);
CREATE INDEX sp_number_value ON sp_number (resource_type, code, value, rid);
CREATE INDEX sp_number_rid ON sp_number (rid);

CREATE TABLE sp_quantity (
  rid bigint NOT NULL,
  resource_type text NOT NULL,
  code text NOT NULL,
  value numeric NOT NULL,
  system text,
  unit_code text,
  unit text
);
CREATE INDEX sp_quantity_value ON sp_quantity (resource_type, code, value, rid);
CREATE INDEX sp_quantity_rid ON sp_quantity (rid);

CREATE TABLE sp_uri (
  rid bigint NOT NULL,
  resource_type text NOT NULL,
  code text NOT NULL,
  value text NOT NULL
);
CREATE INDEX sp_uri_value ON sp_uri (resource_type, code, value text_pattern_ops, rid);
CREATE INDEX sp_uri_rid ON sp_uri (rid);
`;
