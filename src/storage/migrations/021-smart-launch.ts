// SMART EHR launch (API.md §11, https://hl7.org/fhir/smart-app-launch/app-launch.html#launch-app-ehr-launch): the
// launch contexts `ClientApplication/<id>/$launch` hands out (only a hash of the opaque `launch` value is stored, each
// used once, `used_at` set by one atomic UPDATE), the launch an authorization request named and the membership whose
// patient is being picked (standalone `launch/patient`), and the patient/encounter context a login carries.
export const version = 21;
export const sql = `
CREATE TABLE smart_launches (
  launch_hash text PRIMARY KEY,
  client_id text NOT NULL,
  project_id text NOT NULL,
  user_id text,
  patient text NOT NULL,
  encounter text,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
CREATE INDEX smart_launches_expires ON smart_launches (expires_at);

ALTER TABLE authorize_requests ADD COLUMN launch_hash text;
ALTER TABLE authorize_requests ADD COLUMN membership_id text;

ALTER TABLE logins ADD COLUMN launch_patient text;
ALTER TABLE logins ADD COLUMN launch_encounter text;
`;
