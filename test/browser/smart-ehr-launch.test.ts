// The SMART `fhirclient` library completes an EHR launch and a standalone launch with the patient picker against
// Cinder in a real Chromium (API.md §11): a practitioner starts `ClientApplication/<id>/$launch`, the browser opens the
// launch-url, fhirclient's authorize() sends the `launch` on, the practitioner signs in, and ready() reads the launched
// Patient (and sees the launch's `fhirContext` in the token response); standalone with `launch/patient`, the practitioner picks a patient on the sign-in pages. Runs where Debian's
// Chromium is installed (`apt-get install -y chromium`); elsewhere the suite says why it did not run.
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  created,
  inviteRequest,
  setUserPassword,
  startTestApp,
  tokenRequest,
  type TestApp,
} from '../support/app.js';
import { CHROMIUM, HAVE_CHROMIUM, launchChromium } from '../support/chromium.js';
import { testDatabases } from '../support/db.js';
import { freePort } from '../support/listen.js';
import { pkce } from '../support/smart-browser.js';

const PASSWORD = 'a long and correct password';
const FHIRCLIENT = createRequire(import.meta.url).resolve('fhirclient/build/fhir-client.js');
const EMAIL = 'ehr-doc@smart.example';

describe('EHR launch browser tests', () => {
  it('run where Chromium is installed', () => {
    // Not a skip in disguise: this states why the suite below did or did not run.
    if (!HAVE_CHROMIUM)
      console.info(`Browser tests did not run: no Chromium at ${CHROMIUM} (apt-get install -y chromium)`);
    expect(typeof HAVE_CHROMIUM).toBe('boolean');
  });
});

/**
 * The test app, from its own origin: `launch.html` (the EHR opens it with `iss` and `launch`; fhirclient reads both
 * from the URL), `standalone.html` (asks `launch/patient`, names `iss` itself) and `app.html` (the redirect page).
 */
function testAppServer(iss: () => string): http.Server {
  const page = (body: string) =>
    `<!doctype html><html><head><meta charset="utf-8"><script src="/fhir-client.js"></script></head><body>${body}</body></html>`;
  const authorize = (options: string) =>
    page(`<script>
    FHIR.oauth2.authorize({ clientId: 'ehr-launch-app', redirectUri: 'app.html', pkceMode: 'required', ${options} })
      .catch((e) => { document.body.dataset.error = String(e); });
  </script>`);
  const pages: Record<string, string> = {
    '/launch.html': authorize(`scope: 'launch openid fhirUser patient/*.rs'`),
    '/standalone.html': authorize(
      `iss: ${JSON.stringify(iss())}, scope: 'launch/patient openid fhirUser patient/*.rs'`,
    ),
    '/app.html': page(`<script>
    FHIR.oauth2.ready()
      .then((client) => client.patient.read().then((p) => ({ client, p })))
      .then(({ client, p }) => { document.body.dataset.result = JSON.stringify({
        patient: client.patient.id, encounter: client.encounter.id, family: p.name[0].family,
        fhirUser: client.getFhirUser(), fhirContext: client.state.tokenResponse.fhirContext }); })
      .catch((e) => { document.body.dataset.error = String(e); });
  </script>`),
  };
  return http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] as string;
    if (path === '/fhir-client.js') {
      res.writeHead(200, { 'content-type': 'text/javascript' });
      res.end(fs.readFileSync(FHIRCLIENT));
    } else if (pages[path]) {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(pages[path]);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
}

describe.runIf(HAVE_CHROMIUM).each(testDatabases().slice(-1))(
  'SMART EHR launch in Chromium on $name',
  (database) => {
    let t: TestApp;
    let appServer: http.Server;
    let appBase = '';
    let browser: Browser;
    let docToken = '';
    let docId = '';
    const patients: Record<string, string> = {};

    beforeAll(async () => {
      const port = await freePort();
      t = await startTestApp(database, { baseUrl: `http://127.0.0.1:${port}/` });
      await t.app.listen({ port, host: '127.0.0.1' });
      const fhirBase = `http://127.0.0.1:${port}/fhir/R4`;
      appServer = testAppServer(() => fhirBase);
      await new Promise<void>((r) => appServer.listen(0, '127.0.0.1', r));
      appBase = `http://127.0.0.1:${(appServer.address() as AddressInfo).port}`;
      const p = await t.newProject('EHR Launch Clinic');
      const put = await t.request({
        method: 'PUT',
        url: `${t.fhir}/ClientApplication/ehr-launch-app`,
        token: p.adminToken,
        payload: {
          resourceType: 'ClientApplication',
          id: 'ehr-launch-app',
          name: 'EHR launch test app',
          redirectUri: `${appBase}/app.html`,
          launchUri: `${appBase}/launch.html`,
        },
      });
      expect(put.statusCode, put.body).toBeLessThan(300);
      const invited = await inviteRequest(t, p.adminToken, p.projectId, {
        resourceType: 'Practitioner',
        firstName: 'Erin',
        lastName: 'Doctor',
        email: EMAIL,
      });
      expect(invited.statusCode, invited.body).toBe(200);
      const m = invited.json() as { user: { reference: string }; profile: { reference: string } };
      docId = m.profile.reference.split('/')[1] as string;
      await setUserPassword(t, m.user.reference.split('/')[1] as string, PASSWORD);
      for (const family of ['Launched', 'Picked']) {
        patients[family] = (await created(t, p.adminToken, { resourceType: 'Patient', name: [{ family }] }))
          .id as string;
      }
      patients.encounter = (
        await created(t, p.adminToken, {
          resourceType: 'Encounter',
          status: 'in-progress',
          class: { code: 'AMB' },
          subject: { reference: `Patient/${patients.Launched as string}` },
        })
      ).id as string;
      patients.observation = (
        await created(t, p.adminToken, {
          resourceType: 'Observation',
          status: 'final',
          code: { text: 'in context' },
          subject: { reference: `Patient/${patients.Launched as string}` },
        })
      ).id as string;
      // The practitioner's own token (the EHR's session), which starts the launch.
      const v = pkce();
      const login = await t.app.inject({
        method: 'POST',
        url: '/auth/login',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({
          email: EMAIL,
          password: PASSWORD,
          codeChallenge: v.challenge,
          codeChallengeMethod: 'S256',
        }),
      });
      expect(login.statusCode, login.body).toBe(200);
      const tok = await tokenRequest(t.app, {
        grant_type: 'authorization_code',
        code: login.json().code as string,
        code_verifier: v.verifier,
      });
      docToken = tok.json().access_token as string;
      browser = await launchChromium();
    });
    afterAll(async () => {
      await browser?.close();
      await new Promise((r) => appServer?.close(r));
      await t?.close();
    });

    const signIn = async (page: Page) => {
      await page.waitForURL(/\/oauth2\/authorize/, { timeout: 20_000 });
      await page.fill('#email', EMAIL);
      await page.fill('#password', PASSWORD);
      await page.click('button[type=submit]:not([name=cancel])');
    };
    const appResult = async (page: Page) => {
      await page.waitForURL(/\/app\.html/, { timeout: 20_000 });
      await page.waitForFunction(() => document.body.dataset.result || document.body.dataset.error, null, {
        timeout: 20_000,
      });
      expect(await page.evaluate(() => document.body.dataset.error)).toBeUndefined();
      return JSON.parse((await page.evaluate(() => document.body.dataset.result)) as string) as Record<
        string,
        unknown
      >;
    };

    it('EHR launch: the launch-url opens the app, fhirclient signs in and reads the launched Patient', async () => {
      const res = await t.request({
        method: 'POST',
        url: `${t.fhir}/ClientApplication/ehr-launch-app/$launch`,
        token: docToken,
        payload: {
          resourceType: 'Parameters',
          parameter: [
            { name: 'patient', valueReference: { reference: `Patient/${patients.Launched as string}` } },
            { name: 'encounter', valueReference: { reference: `Encounter/${patients.encounter as string}` } },
            {
              name: 'fhirContext',
              valueReference: { reference: `Observation/${patients.observation as string}` },
            },
          ],
        },
      });
      expect(res.statusCode, res.body).toBe(200);
      const launchUrl = (res.json().parameter as { name: string; valueUrl?: string }[]).find(
        (x) => x.name === 'launch-url',
      )?.valueUrl as string;
      const page = await browser.newPage();
      await page.goto(launchUrl);
      await signIn(page);
      expect(await appResult(page)).toEqual({
        patient: patients.Launched,
        encounter: patients.encounter,
        family: 'Launched',
        fhirUser: `Practitioner/${docId}`,
        fhirContext: [{ reference: `Observation/${patients.observation as string}` }],
      });
      await page.close();
    });

    it('standalone launch/patient: the practitioner searches, picks a patient, and the app reads it', async () => {
      const page = await browser.newPage();
      await page.goto(`${appBase}/standalone.html`);
      await signIn(page);
      await page.waitForSelector('#search', { timeout: 20_000 });
      await page.fill('#search', 'Pick');
      await page.click('button[name=find]');
      await page.waitForSelector(`input[name=patient][value="${patients.Picked as string}"]`, {
        timeout: 20_000,
      });
      expect(await page.locator(`input[name=patient][value="${patients.Launched as string}"]`).count()).toBe(
        0,
      );
      await page.check(`input[name=patient][value="${patients.Picked as string}"]`);
      await page.click('#choose-patient');
      const result = await appResult(page);
      expect(result).toMatchObject({
        patient: patients.Picked,
        family: 'Picked',
        fhirUser: `Practitioner/${docId}`,
      });
      expect(result).not.toHaveProperty('fhirContext');
      await page.close();
    });
  },
);
