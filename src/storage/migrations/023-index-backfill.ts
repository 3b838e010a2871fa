// Index backfill after an upgrade (API.md §11, docs/operations.md "Upgrades"): migrations 017, 019 and 020 added index
// tables (sp_identifier, sp_text, sp_lastn) that resources stored before them are missing from. On a database that
// already holds resources, this records one backfill per table, for the resources stored so far (rid ≤ `upto`); every
// server process then fills them in the background (src/jobs/index-backfill.ts): each row is claimed with
// FOR UPDATE SKIP LOCKED and a lease, so it is done once across instances, and `checkpoint` (the last rid written, in
// the same transaction as the batch's index rows) lets another process resume it after a crash.
export const version = 23;
export const sql = `
CREATE TABLE index_backfills (
  table_name text PRIMARY KEY,
  resource_type text,
  upto bigint NOT NULL,
  state text NOT NULL DEFAULT 'pending',
  checkpoint bigint NOT NULL DEFAULT 0,
  done_count bigint NOT NULL DEFAULT 0,
  lease_owner text,
  lease_until timestamptz,
  started_at timestamptz,
  finished_at timestamptz
);
INSERT INTO index_backfills (table_name, resource_type, upto)
SELECT t.name, t.type, m.upto FROM (SELECT max(rid) AS upto FROM resources) m
CROSS JOIN (VALUES ('sp_identifier', NULL), ('sp_text', NULL), ('sp_lastn', 'Observation')) AS t(name, type)
WHERE m.upto IS NOT NULL;
`;
