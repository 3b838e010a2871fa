// Observation `$lastn` index (https://hl7.org/fhir/R4/observation-operation-lastn.html, API.md §11): one row per
// Observation, code coding (or text-only code) and category key, so that the most recent Observations of each code of
// one subject are read from index ranges: the subject's distinct codes by a skip scan, then `max` rows per code
// backwards by `effective`, whatever the number of the subject's Observations. `category` is '' on the row every
// Observation has (no category filter), `<system>|<code>` and `*|<code>` (any system) on one row each per category
// coding. `effective` is the latest instant of Observation.effective[x] (the `date` parameter's upper bound, as
// `_sort=-date` orders), '-infinity' without one. Observations written before this migration get rows when written
// again or by `$reindex`.
export const version = 20;
export const sql = `
CREATE TABLE sp_lastn (
  rid bigint NOT NULL,
  subject text NOT NULL,
  category text NOT NULL,
  system text NOT NULL,
  value text NOT NULL,
  effective timestamptz NOT NULL
);
CREATE INDEX sp_lastn_key ON sp_lastn (subject, category, system, value, effective, rid);
CREATE INDEX sp_lastn_rid ON sp_lastn (rid);
`;
