// Narrower search index rows (issue 30, "fewer bytes per resource"):
// - sp_reference keeps only `ref`: where a reference names a resource, `ref` is `<type>/<id>` and the target's type and
//   id are its two parts (src/fhir/search/sql.ts reads them with split_part); the two columns held them a second
//   time (about a third of a reference row).
// - One reference row where a parameter narrowed by target type indexes the same reference as its wider one
//   (Observation `patient` = `subject.where(resolve() is Patient)`: src/fhir/search/reference-pairs.ts): the row is
//   kept under the narrower code only, and queries on the wider code read both codes. Below, the existing wider rows
//   that a narrower row of the same resource repeats are deleted (the pairs are those reference-pairs.ts finds in the
//   R4 definitions).
// - A composite's token components (`<code>$<k>` rows, migration 010) hold no `text_norm`: `:text` never reads them.
//   The `:text` index (migration 019) leaves them out, so that it shrinks on existing databases too; queries say
//   `grp IS NULL` to use it.
// Existing databases: dropping a column is a catalog change (PostgreSQL stores nothing for it in rows written from now
// on), the `:text` index is rebuilt smaller, and the repeated wider reference rows are deleted. The bytes that older
// rows still hold (the dropped columns, composite rows' text) are given back as they are written again (`$reindex`);
// PostgreSQL reuses the deleted rows' space for new rows; `VACUUM FULL sp_reference, sp_token` at a quiet time gives
// all of it back to the file system at once (it locks the tables while it runs).
// https://www.postgresql.org/docs/current/sql-altertable.html (DROP COLUMN)
export const version = 25;
export const sql = `
ALTER TABLE sp_reference DROP COLUMN target_type, DROP COLUMN target_id;
DELETE FROM sp_reference w USING sp_reference n, (VALUES
  ('Account', 'subject', 'patient'), ('Appointment', 'actor', 'location'),
  ('AppointmentResponse', 'actor', 'location'), ('Basic', 'subject', 'patient'),
  ('CarePlan', 'subject', 'patient'), ('CareTeam', 'subject', 'patient'), ('ChargeItem', 'subject', 'patient'),
  ('ClinicalImpression', 'subject', 'patient'), ('Communication', 'subject', 'patient'),
  ('CommunicationRequest', 'subject', 'patient'), ('Composition', 'subject', 'patient'),
  ('Condition', 'subject', 'patient'), ('Contract', 'subject', 'patient'),
  ('DeviceRequest', 'subject', 'patient'), ('DiagnosticReport', 'subject', 'patient'),
  ('DocumentManifest', 'subject', 'patient'), ('DocumentReference', 'subject', 'patient'),
  ('Encounter', 'subject', 'patient'), ('Encounter', 'participant', 'practitioner'),
  ('Flag', 'subject', 'patient'), ('Goal', 'subject', 'patient'), ('GuidanceResponse', 'subject', 'patient'),
  ('ImagingStudy', 'subject', 'patient'), ('Invoice', 'subject', 'patient'), ('List', 'subject', 'patient'),
  ('MeasureReport', 'subject', 'patient'), ('Media', 'subject', 'patient'),
  ('MedicationAdministration', 'subject', 'patient'), ('MedicationDispense', 'subject', 'patient'),
  ('MedicationRequest', 'subject', 'patient'), ('MedicationStatement', 'subject', 'patient'),
  ('Observation', 'subject', 'patient'), ('Person', 'link', 'patient'), ('Procedure', 'subject', 'patient'),
  ('Provenance', 'target', 'patient'), ('QuestionnaireResponse', 'subject', 'patient'),
  ('RequestGroup', 'subject', 'patient'), ('RiskAssessment', 'subject', 'patient'),
  ('ServiceRequest', 'subject', 'patient'), ('Specimen', 'subject', 'patient'), ('Task', 'subject', 'patient')
) AS p (resource_type, wide, narrow)
WHERE w.resource_type = p.resource_type AND w.code = p.wide AND w.grp IS NULL
  AND n.rid = w.rid AND n.code = p.narrow AND n.ref = w.ref AND n.grp IS NULL;
DROP INDEX sp_token_text;
CREATE INDEX sp_token_text ON sp_token (resource_type, code, text_norm text_pattern_ops, rid) WHERE text_norm IS NOT NULL AND grp IS NULL;
`;
