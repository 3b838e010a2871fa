// The SMART `fhirclient` JavaScript library completes a standalone launch against Cinder in a real Chromium (issue 17):
// a test app page (served from another origin) calls FHIR.oauth2.authorize with PKCE, Cinder's sign-in page takes a
// Patient user's password, the app page's FHIR.oauth2.ready() exchanges the code and reads the Patient in context.
// Runs where Debian's Chromium is installed (`apt-get install -y chromium`; `.ci/run` installs it); elsewhere the
// suite says why it did not run.
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inviteRequest, setUserPassword, startTestApp, type TestApp } from '../support/app.js';
import { CHROMIUM, HAVE_CHROMIUM, launchChromium } from '../support/chromium.js';
import { testDatabases } from '../support/db.js';
import { freePort } from '../support/listen.js';

const PASSWORD = 'a long and correct password';
const FHIRCLIENT = createRequire(import.meta.url).resolve('fhirclient/build/fhir-client.js');

describe('browser tests', () => {
  it('run where Chromium is installed', () => {
    // Not a skip in disguise: this states why the launch suite below did or did not run.
    if (!HAVE_CHROMIUM)
      console.info(`Browser tests did not run: no Chromium at ${CHROMIUM} (apt-get install -y chromium)`);
    expect(typeof HAVE_CHROMIUM).toBe('boolean');
  });
});

/** The test app: a launch page and the redirect page, served from their own origin, with fhirclient's bundle. */
function testAppServer(iss: () => string): http.Server {
  const page = (body: string) =>
    `<!doctype html><html><head><meta charset="utf-8"><script src="/fhir-client.js"></script></head><body>${body}</body></html>`;
  const launch = page(`<script>
    FHIR.oauth2.authorize({ iss: ${JSON.stringify(iss())}, clientId: 'smart-launch-app',
      scope: 'openid fhirUser launch/patient patient/*.rs', redirectUri: 'app.html', pkceMode: 'required' })
      .catch((e) => { document.body.dataset.error = String(e); });
  </script>`);
  const app = page(`<script>
    FHIR.oauth2.ready()
      .then((client) => client.request('Patient/' + client.patient.id).then((p) => ({ client, p })))
      .then(({ client, p }) => { document.body.dataset.result = JSON.stringify({
        patient: client.patient.id, family: p.name[0].family, fhirUser: client.getFhirUser() }); })
      .catch((e) => { document.body.dataset.error = String(e); });
  </script>`);
  return http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/fhir-client.js') {
      res.writeHead(200, { 'content-type': 'text/javascript' });
      res.end(fs.readFileSync(FHIRCLIENT));
    } else if (path === '/launch.html' || path === '/app.html') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(path === '/launch.html' ? launch : app);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
}

describe.runIf(HAVE_CHROMIUM).each(testDatabases().slice(-1))(
  'SMART standalone launch in Chromium on $name',
  (database) => {
    let t: TestApp;
    let appServer: http.Server;
    let appBase = '';
    let fhirBase = '';
    let browser: Browser;
    let patientId = '';

    beforeAll(async () => {
      const port = await freePort();
      t = await startTestApp(database, { baseUrl: `http://127.0.0.1:${port}/` });
      await t.app.listen({ port, host: '127.0.0.1' });
      fhirBase = `http://127.0.0.1:${port}/fhir/R4`;
      appServer = testAppServer(() => fhirBase);
      await new Promise<void>((r) => appServer.listen(0, '127.0.0.1', r));
      appBase = `http://127.0.0.1:${(appServer.address() as AddressInfo).port}`;
      const p = await t.newProject('Launch Clinic');
      const put = await t.request({
        method: 'PUT',
        url: `${t.fhir}/ClientApplication/smart-launch-app`,
        token: t.adminToken,
        payload: {
          resourceType: 'ClientApplication',
          id: 'smart-launch-app',
          meta: { project: p.projectId },
          name: 'Launch test app',
          redirectUri: `${appBase}/app.html`,
        },
      });
      expect(put.statusCode, put.body).toBeLessThan(300);
      const invited = await inviteRequest(t, p.adminToken, p.projectId, {
        resourceType: 'Patient',
        firstName: 'Launch',
        lastName: 'Tester',
        email: 'launch@smart.example',
      });
      expect(invited.statusCode, invited.body).toBe(200);
      const m = invited.json() as { user: { reference: string }; profile: { reference: string } };
      patientId = m.profile.reference.split('/')[1] as string;
      await setUserPassword(t, m.user.reference.split('/')[1] as string, PASSWORD);
      browser = await launchChromium();
    });
    afterAll(async () => {
      await browser?.close();
      await new Promise((r) => appServer?.close(r));
      await t?.close();
    });

    it('fhirclient launches, the user signs in, and the app reads its Patient with the token', async () => {
      const page = await browser.newPage();
      await page.goto(`${appBase}/launch.html`);
      await page.waitForURL(/\/oauth2\/authorize/, { timeout: 20_000 });
      await page.fill('#email', 'launch@smart.example');
      await page.fill('#password', PASSWORD);
      await page.click('button[type=submit]:not([name=cancel])');
      await page.waitForURL(/\/app\.html/, { timeout: 20_000 });
      await page.waitForFunction(() => document.body.dataset.result || document.body.dataset.error, null, {
        timeout: 20_000,
      });
      const error = await page.evaluate(() => document.body.dataset.error);
      expect(error).toBeUndefined();
      const result = JSON.parse((await page.evaluate(() => document.body.dataset.result)) as string) as {
        patient: string;
        family: string;
        fhirUser: string;
      };
      expect(result).toEqual({ patient: patientId, family: 'Tester', fhirUser: `Patient/${patientId}` });
      await page.close();
    });
  },
);
