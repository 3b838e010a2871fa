// Narrower search index rows (issue 30, "fewer bytes per resource"):
// - sp_reference keeps only `ref`: where a reference names a resource, `ref` is `<type>/<id>` and the target's type and
//   id are its two parts (src/fhir/search/sql.ts reads them with split_part); the two columns held them a second
//   time (about a third of a reference row).
// - A composite's token components (`<code>$<k>` rows, migration 010) hold no `text_norm`: `:text` never reads them.
//   The `:text` index (migration 019) leaves them out, so that it shrinks on existing databases too; queries say
//   `grp IS NULL` to use it.
// Existing databases: no row needs rewriting for the answers to stay the same, and this migration rewrites none (on a
// large database that would hold start-up for minutes): dropping a column is a catalog change (PostgreSQL stores
// nothing for it in rows written from now on), and the `:text` index is rebuilt smaller. The bytes that older rows
// still hold (the dropped columns, composite rows' text) are given back as they are written again (`$reindex`), or at
// once by `VACUUM FULL sp_reference, sp_token` at a quiet time (it locks the tables while it runs).
// https://www.postgresql.org/docs/current/sql-altertable.html (DROP COLUMN)
export const version = 25;
export const sql = `
ALTER TABLE sp_reference DROP COLUMN target_type, DROP COLUMN target_id;
DROP INDEX sp_token_text;
CREATE INDEX sp_token_text ON sp_token (resource_type, code, text_norm text_pattern_ops, rid) WHERE text_norm IS NOT NULL AND grp IS NULL;
`;
