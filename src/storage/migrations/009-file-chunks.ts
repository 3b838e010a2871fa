// Job output files in the database (issue 13: with PostgreSQL every instance serves every job's files without a
// shared directory). A file is the run of its chunks in `offset` order (a byte offset); an append adds a chunk, a
// truncate deletes the chunks past the cut and shortens the one across it. The files are UTF-8 text (NDJSON, CSV),
// so `data` is text: no hex encoding on the wire, as bytea parameters would have. Chunks are stored uncompressed
// (EXTERNAL): they live a day (exportRetention), and compressing megabytes per page cost the export half its speed.
export const version = 9;
export const sql = `
CREATE TABLE file_chunks (
  key text NOT NULL,
  "offset" bigint NOT NULL,
  data text NOT NULL,
  PRIMARY KEY (key, "offset")
);
ALTER TABLE file_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
`;
