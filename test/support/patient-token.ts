// A SMART patient-scoped token for tests of patient-narrowed reads: a Patient user of the project (invited, with a
// password) signs in to a public client through the authorize page, asking for `scope`.
import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { inviteRequest, setUserPassword, type TestApp } from './app.js';
import { smartLaunch } from './smart-browser.js';

const PASSWORD = 'a long and correct password for a patient';
const REDIRECT = 'https://app.example/callback';

/** The new Patient's id and its token (the token response's `patient` is that id). */
export async function patientToken(
  t: TestApp,
  adminToken: string,
  projectId: string,
  scope: string,
): Promise<{ patient: string; token: string }> {
  const clientId = `patient-app-${randomUUID().slice(0, 8)}`;
  const client = await t.request({
    method: 'PUT',
    url: `${t.fhir}/ClientApplication/${clientId}`,
    token: adminToken,
    payload: { resourceType: 'ClientApplication', id: clientId, name: 'Patient app', redirectUri: REDIRECT },
  });
  expect(client.statusCode, client.body).toBeLessThan(300);
  const email = `${clientId}@patients.example`;
  const invited = await inviteRequest(t, adminToken, projectId, {
    resourceType: 'Patient',
    firstName: 'Pat',
    lastName: 'Scoped',
    email,
  });
  expect(invited.statusCode, invited.body).toBe(200);
  const m = invited.json() as { user: { reference: string }; profile: { reference: string } };
  await setUserPassword(t, m.user.reference.split('/')[1] as string, PASSWORD);
  const launched = await smartLaunch(t.app, {
    clientId,
    redirectUri: REDIRECT,
    aud: 'http://cinder.test/fhir/R4',
    email,
    password: PASSWORD,
    scope: `launch/patient ${scope}`,
  });
  const patient = m.profile.reference.split('/')[1] as string;
  expect(launched.patient).toBe(patient);
  return { patient, token: launched.access_token as string };
}
