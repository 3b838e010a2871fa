// `:missing` and `:not` answered from an index (issue 30): `sp_missing` holds, per current resource version, the ids
// of the built-in search parameters it has NO value for (`absent`, a small array; no row when it has a value of every
// one), with a GIN index, so `:missing=true` is an array containment probe instead of an anti-join over every resource
// of the type. `sp_param_ids` is the dictionary of those ids ((resource type, code) → smallint, 028-param-codes.ts),
// for operators reading the table by hand. The index writer writes the rows in the statement of the other index rows;
// on a database that already holds resources, the index backfill of migration 023 fills it for them in the background,
// and until it is done `:missing`/`:not` searches keep the anti-join (search/missing-plan.ts).
// gin_pending_list_limit 256 kB (default 4 MB): a search reads the whole pending list of new entries, and the pages of
// a flushed list stay in the index file (measured: 4.3 MB of 5.2 MB after loading 25,000 resources).
// `sp_token_code_value`: the planner's statistics of (type, code, value) together, without which it estimates
// `status < 'final'` from every token's values (most codes sort before 'final') and walks every resource for `:not`.
import { paramIds } from './028-param-codes.js';

export const version = 28;

const dictionary = paramIds()
  .map(([id, type, code]) => `(${id}, '${type}', '${code}')`)
  .join(', ');

export const sql = `
CREATE TABLE sp_param_ids (
  id smallint PRIMARY KEY,
  resource_type text NOT NULL,
  code text NOT NULL,
  UNIQUE (resource_type, code)
);
INSERT INTO sp_param_ids (id, resource_type, code) VALUES ${dictionary};
CREATE TABLE sp_missing (
  rid bigint NOT NULL,
  absent smallint[] NOT NULL
);
CREATE INDEX sp_missing_rid ON sp_missing (rid);
CREATE INDEX sp_missing_absent ON sp_missing USING gin (absent) WITH (gin_pending_list_limit = 256);
CREATE STATISTICS sp_token_code_value (mcv) ON resource_type, code, value FROM sp_token;
INSERT INTO index_backfills (table_name, resource_type, upto)
SELECT 'sp_missing', NULL, max(rid) FROM resources HAVING max(rid) IS NOT NULL;
`;
