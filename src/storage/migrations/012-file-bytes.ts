// Binary contents in the database file store (`{fhir}/Binary` uploads, src/storage/db-files.ts `put`): a chunk holds
// either UTF-8 text (`data`, export files) or raw bytes (`bytes`), never both. Bytes are kept apart from text so that
// export files keep their text wire format, and binary uploads are not mangled by a text encoding.
export const version = 12;
export const sql = `
ALTER TABLE file_chunks ADD COLUMN bytes bytea;
ALTER TABLE file_chunks ALTER COLUMN data DROP NOT NULL;
ALTER TABLE file_chunks ADD CONSTRAINT file_chunks_one_payload CHECK ((data IS NULL) <> (bytes IS NULL));
ALTER TABLE file_chunks ALTER COLUMN bytes SET STORAGE EXTERNAL;
`;
