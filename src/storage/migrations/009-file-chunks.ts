// Job output files in the database (issue 13: with PostgreSQL every instance serves every job's files without a
// shared directory). A file is the run of its chunks in `offset` order; an append adds a chunk, a truncate deletes
// the chunks past the cut and shortens the one across it.
export const version = 9;
export const sql = `
CREATE TABLE file_chunks (
  key text NOT NULL,
  "offset" bigint NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (key, "offset")
);
`;
