// The admin console through HTTP (issue 17): its static files at {base}console/ (types, caching, the single-page
// fallback, no way out of the built folder), and its public client `cinder-console`, which signs any user in through
// any of their memberships with PKCE and no secret, while every other client keeps its own rules.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureSuperAdmin } from '../../src/auth/bootstrap.js';
import { CONSOLE_CLIENT_ID } from '../../src/auth/console-client.js';
import { inviteRequest, setUserPassword, startTestApp, tokenRequest, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import {
  actionOf,
  Browser,
  optionsOf,
  pkce,
  redirectParams,
  transactionOf,
} from '../support/smart-browser.js';

const PASSWORD = 'a long and correct password';
const CONSOLE = 'http://cinder.test/console/';
const AUD = 'http://cinder.test/fhir/R4';
const SCRIPT = 'console.log("console bundle");'.repeat(40);

/** A stand-in for Vite's output: index.html with relative asset URLs, a hashed script and a stylesheet. */
function fakeBuild(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-console-'));
  fs.mkdirSync(path.join(dir, 'assets'));
  fs.writeFileSync(
    path.join(dir, 'index.html'),
    '<!doctype html><html><head><script type="module" crossorigin src="./assets/index-abc123.js"></script>' +
      '<link rel="stylesheet" href="./assets/index-def456.css"></head><body><div id="app"></div></body></html>',
  );
  fs.writeFileSync(path.join(dir, 'assets', 'index-abc123.js'), SCRIPT);
  fs.writeFileSync(path.join(dir, 'assets', 'index-def456.css'), 'body{margin:0}');
  fs.writeFileSync(path.join(dir, 'assets', 'index-abc123.js.map'), '{"secret":"source map"}');
  return dir;
}

describe.each(testDatabases())('admin console on $name', (database) => {
  let t: TestApp;
  let dir: string;

  beforeAll(async () => {
    dir = fakeBuild();
    t = await startTestApp(database, {}, { consoleDir: dir });
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  describe('static files', () => {
    it('serves index.html at console/ with absolute asset URLs, no-cache and a strict CSP', async () => {
      const res = await t.request({ method: 'GET', url: '/console/' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.headers['cache-control']).toBe('no-cache');
      expect(res.headers['content-security-policy']).toContain("script-src 'self'");
      expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(res.headers['referrer-policy']).toBe('no-referrer');
      expect(res.body).toContain('src="/console/assets/index-abc123.js"');
      expect(res.body).not.toContain('./assets/');
    });

    it('redirects console to console/ (relative URLs need the slash), keeping the query', async () => {
      const res = await t.request({ method: 'GET', url: '/console?code=x&state=y' });
      expect(res.statusCode).toBe(301);
      expect(res.headers.location).toBe('/console/?code=x&state=y');
    });

    it('answers index.html for client routes (single-page app fallback)', async () => {
      for (const url of ['/console/jobs', '/console/resources/Patient/123', '/console/people?x=1']) {
        const res = await t.request({ method: 'GET', url });
        expect(res.statusCode, url).toBe(200);
        expect(res.body, url).toContain('<div id="app">');
      }
    });

    it('serves hashed assets with their type and an immutable cache, gzip when asked, and 304 for its ETag', async () => {
      const res = await t.request({ method: 'GET', url: '/console/assets/index-abc123.js' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('text/javascript; charset=utf-8');
      expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.body).toBe(SCRIPT);
      const css = await t.request({ method: 'GET', url: '/console/assets/index-def456.css' });
      expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
      const gz = await t.request({
        method: 'GET',
        url: '/console/assets/index-abc123.js',
        headers: { 'accept-encoding': 'gzip, br' },
      });
      expect(gz.headers['content-encoding']).toBe('gzip');
      expect(gunzipSync(gz.rawPayload).toString()).toBe(SCRIPT);
      const again = await t.request({
        method: 'GET',
        url: '/console/assets/index-abc123.js',
        headers: { 'if-none-match': res.headers.etag as string },
      });
      expect(again.statusCode).toBe(304);
      expect(again.body).toBe('');
    });

    it('answers 404 for a missing asset and for source maps, never index.html as script', async () => {
      for (const url of [
        '/console/assets/index-old.js',
        '/console/assets/index-abc123.js.map',
        '/console/x.png',
      ]) {
        const res = await t.request({ method: 'GET', url });
        expect(res.statusCode, url).toBe(404);
        expect((res.json() as { resourceType: string }).resourceType).toBe('OperationOutcome');
      }
    });

    it('never reaches outside the built folder', async () => {
      const secret = path.join(path.dirname(dir), `${path.basename(dir)}-secret.txt`);
      fs.writeFileSync(secret, 'not for the web');
      try {
        const name = path.basename(secret);
        for (const url of [
          `/console/../${name}`,
          `/console/..%2f${name}`,
          `/console/%2e%2e/${name}`,
          `/console/assets/..%2f..%2f${name}`,
          '/console/..%2f..%2f..%2f..%2fetc%2fpasswd',
          '/console/%2fetc%2fpasswd',
        ]) {
          const res = await t.request({ method: 'GET', url });
          expect(res.body, url).not.toContain('not for the web');
          expect(res.body, url).not.toContain('root:');
        }
      } finally {
        fs.rmSync(secret);
      }
    });

    it('needs no token, and says how to build the console when it is not built', async () => {
      const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-console-empty-'));
      const bare = await startTestApp(database, {}, { consoleDir: empty, db: t.db });
      try {
        const res = await bare.request({ method: 'GET', url: '/console/' });
        expect(res.statusCode).toBe(404);
        const body = res.json() as { resourceType: string };
        expect(body.resourceType).toBe('OperationOutcome');
        expect(res.body).toContain('npm run build');
      } finally {
        await bare.close();
        fs.rmSync(empty, { recursive: true, force: true });
      }
    });
  });

  describe('the console client', () => {
    let projectId: string;
    let projectAdminToken: string;
    let userId: string;

    beforeAll(async () => {
      const p = await t.newProject('Console Clinic');
      projectId = p.projectId;
      projectAdminToken = p.adminToken;
      const invited = await inviteRequest(t, p.adminToken, projectId, {
        resourceType: 'Practitioner',
        firstName: 'Connie',
        lastName: 'Sole',
        email: 'connie@console.example',
        admin: true,
      });
      expect(invited.statusCode, invited.body).toBe(200);
      userId = (invited.json() as { user: { reference: string } }).user.reference.split('/')[1] as string;
      await setUserPassword(t, userId, PASSWORD);
    });

    const authorize = (challenge: string, clientId = CONSOLE_CLIENT_ID, redirectUri = CONSOLE) =>
      `/oauth2/authorize?${new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: redirectUri,
        scope: 'openid offline_access',
        state: 'console-state',
        aud: AUD,
        code_challenge: challenge,
        code_challenge_method: 'S256',
      }).toString()}`;

    const signIn = async (email: string, password = PASSWORD) => {
      const browser = new Browser(t.app);
      const p = pkce();
      const page = await browser.get(authorize(p.challenge));
      expect(page.statusCode, page.body).toBe(200);
      const res = await browser.post(actionOf(page), { transaction: transactionOf(page), email, password });
      return { res, browser, verifier: p.verifier };
    };

    /** The console's ClientApplication, read and written by the super administrator. */
    const readConsoleClient = () =>
      t.request({
        method: 'GET',
        url: `${t.fhir}/ClientApplication/${CONSOLE_CLIENT_ID}`,
        token: t.adminToken,
      });
    const writeConsoleClient = (payload: object) =>
      t.request({
        method: 'PUT',
        url: `${t.fhir}/ClientApplication/${CONSOLE_CLIENT_ID}`,
        token: t.adminToken,
        payload,
      });

    it('is ensured at start, public, with the redirect URI {base}console/, once', async () => {
      const read = await readConsoleClient();
      expect(read.statusCode).toBe(200);
      const client = read.json() as { redirectUri: string; meta: { project: string; versionId: string } };
      expect(client.redirectUri).toBe(CONSOLE);
      expect(client.meta.project).toBe(t.superProjectId);
      // A second start changes nothing; a new baseUrl is written back.
      const env = { clock: () => new Date(), newId: () => crypto.randomUUID(), fhirBase: AUD };
      const again = await ensureSuperAdmin(t.db, env, t.config.admin);
      expect(again.consoleClient).toBe(true);
      const reread = await readConsoleClient();
      expect((reread.json() as typeof client).meta.versionId).toBe(client.meta.versionId);
      await ensureSuperAdmin(
        t.db,
        { ...env, fhirBase: 'https://fhir.example.org/x/fhir/R4' },
        t.config.admin,
      );
      const moved = await readConsoleClient();
      expect((moved.json() as typeof client).redirectUri).toBe('https://fhir.example.org/x/console/');
      await ensureSuperAdmin(t.db, env, t.config.admin);
    });

    it('signs a tenant admin in through their own project, and the code is exchanged with PKCE and no secret', async () => {
      const { res, verifier } = await signIn('connie@console.example');
      expect(res.statusCode, res.body).toBe(303);
      expect((res.headers.location as string).startsWith(CONSOLE)).toBe(true);
      const q = redirectParams(res);
      expect(q.get('state')).toBe('console-state');
      const code = q.get('code') as string;
      const token = await tokenRequest(t.app, {
        grant_type: 'authorization_code',
        code,
        code_verifier: verifier,
        client_id: CONSOLE_CLIENT_ID,
        redirect_uri: CONSOLE,
      });
      expect(token.statusCode, token.body).toBe(200);
      const body = token.json() as {
        access_token: string;
        refresh_token?: string;
        project: { reference: string };
      };
      expect(body.project.reference).toBe(`Project/${projectId}`);
      expect(body.refresh_token).toBeTruthy();
      expect(decodeJwt(body.access_token).client_id).toBe(CONSOLE_CLIENT_ID);
      // The token acts as the tenant admin, in the tenant's project only.
      const me = await t.request({ method: 'GET', url: '/auth/me', token: body.access_token });
      expect(me.statusCode).toBe(200);
      expect((me.json() as { project: { id: string } }).project.id).toBe(projectId);
      const members = await t.request({
        method: 'GET',
        url: `${t.fhir}/ProjectMembership?project=Project/${projectId}`,
        token: body.access_token,
      });
      expect(members.statusCode).toBe(200);
      const superProject = await t.request({
        method: 'GET',
        url: `${t.fhir}/Project/${t.superProjectId}`,
        token: body.access_token,
      });
      expect(superProject.statusCode).toBe(404);
      // The refresh token keeps working for the console client.
      const refreshed = await tokenRequest(t.app, {
        grant_type: 'refresh_token',
        refresh_token: body.refresh_token as string,
        client_id: CONSOLE_CLIENT_ID,
      });
      expect(refreshed.statusCode, refreshed.body).toBe(200);
    });

    it('refuses the code without the PKCE verifier, and with a wrong one', async () => {
      for (const verifier of [undefined, pkce().verifier]) {
        const { res } = await signIn('connie@console.example');
        const code = redirectParams(res).get('code') as string;
        const token = await tokenRequest(t.app, {
          grant_type: 'authorization_code',
          code,
          ...(verifier ? { code_verifier: verifier } : {}),
          client_id: CONSOLE_CLIENT_ID,
          redirect_uri: CONSOLE,
        });
        expect(token.statusCode).toBe(400);
        expect((token.json() as { error: string }).error).toBe(
          verifier ? 'invalid_grant' : 'invalid_request',
        );
      }
    });

    it('offers a user with memberships in several projects the chooser across projects', async () => {
      const other = await t.newProject('Second Clinic');
      const invited = await inviteRequest(t, other.adminToken, other.projectId, {
        resourceType: 'Patient',
        firstName: 'Connie',
        lastName: 'Sole',
        email: 'connie@console.example',
      });
      expect(invited.statusCode, invited.body).toBe(200);
      const { res, browser, verifier } = await signIn('connie@console.example');
      expect(res.statusCode, res.body).toBe(200);
      const options = optionsOf(res);
      expect(options.map((o) => o.label).sort()).toEqual([
        'Console Clinic — Practitioner Connie Sole',
        'Second Clinic — Patient Connie Sole',
      ]);
      const second = options.find((o) => o.label.startsWith('Second')) as { id: string };
      const chosen = await browser.post(actionOf(res), {
        transaction: transactionOf(res),
        membership: second.id,
      });
      expect(chosen.statusCode, chosen.body).toBe(303);
      const token = await tokenRequest(t.app, {
        grant_type: 'authorization_code',
        code: redirectParams(chosen).get('code') as string,
        code_verifier: verifier,
        client_id: CONSOLE_CLIENT_ID,
        redirect_uri: CONSOLE,
      });
      expect(token.statusCode, token.body).toBe(200);
      expect((token.json() as { project: { reference: string } }).project.reference).toBe(
        `Project/${other.projectId}`,
      );
    });

    it('has no secret login: client_credentials without or with a guessed secret is refused', async () => {
      for (const secret of [undefined, 'guess']) {
        const res = await tokenRequest(t.app, {
          grant_type: 'client_credentials',
          client_id: CONSOLE_CLIENT_ID,
          ...(secret ? { client_secret: secret } : {}),
        });
        // No secret at all is a malformed request (400); a guessed one is an unknown client (401).
        expect(res.statusCode).toBe(secret ? 401 : 400);
        expect((res.json() as { access_token?: string }).access_token).toBeUndefined();
      }
    });

    it('cannot be taken over or changed by a tenant admin', async () => {
      const put = await t.request({
        method: 'PUT',
        url: `${t.fhir}/ClientApplication/${CONSOLE_CLIENT_ID}`,
        token: projectAdminToken,
        payload: {
          resourceType: 'ClientApplication',
          id: CONSOLE_CLIENT_ID,
          name: 'Hijacked',
          redirectUri: 'https://evil.example/',
        },
      });
      expect(put.statusCode).toBe(404);
      const read = await readConsoleClient();
      expect((read.json() as { redirectUri: string }).redirectUri).toBe(CONSOLE);
    });

    it('leaves other clients to their own project: a tenant app still refuses users of other projects', async () => {
      const other = await t.newProject('Third Clinic');
      const put = await t.request({
        method: 'PUT',
        url: `${t.fhir}/ClientApplication/third-app`,
        token: t.adminToken,
        payload: {
          resourceType: 'ClientApplication',
          id: 'third-app',
          meta: { project: other.projectId },
          name: 'Third app',
          redirectUri: 'https://third.example/cb',
        },
      });
      expect(put.statusCode, put.body).toBeLessThan(300);
      const browser = new Browser(t.app);
      const p = pkce();
      const page = await browser.get(authorize(p.challenge, 'third-app', 'https://third.example/cb'));
      const res = await browser.post(actionOf(page), {
        transaction: transactionOf(page),
        email: 'connie@console.example',
        password: PASSWORD,
      });
      expect(res.statusCode).toBe(303);
      expect(redirectParams(res).get('error')).toBe('access_denied');
    });

    it('is honoured only in the super administrator project: a tenant holding the id signs no one in elsewhere', async () => {
      const tenant = await t.newProject('Squatter');
      const move = (to: string) =>
        t.db.query(
          `UPDATE resources SET project_id = $1 WHERE resource_type = 'ClientApplication' AND id = $2`,
          [to, CONSOLE_CLIENT_ID],
        );
      await move(tenant.projectId);
      try {
        const env = { clock: () => new Date(), newId: () => crypto.randomUUID(), fhirBase: AUD };
        const boot = await ensureSuperAdmin(t.db, env, t.config.admin);
        expect(boot.consoleClient).toBe(false);
        const { res } = await signIn('connie@console.example');
        expect(res.statusCode).toBe(303);
        expect(redirectParams(res).get('error')).toBe('access_denied');
      } finally {
        await move(t.superProjectId);
      }
    });

    it('can be switched off: the code of a deactivated console client is refused, and a restart keeps it off', async () => {
      const { res: page, browser, verifier } = await signIn('connie@console.example');
      // Connie has two memberships by now: the chooser comes first.
      const first = optionsOf(page)[0] as { id: string };
      const res = await browser.post(actionOf(page), {
        transaction: transactionOf(page),
        membership: first.id,
      });
      const code = redirectParams(res).get('code') as string;
      const read = await readConsoleClient();
      const off = await writeConsoleClient({ ...(read.json() as object), status: 'off' });
      expect(off.statusCode, off.body).toBe(200);
      try {
        const token = await tokenRequest(t.app, {
          grant_type: 'authorization_code',
          code,
          code_verifier: verifier,
          client_id: CONSOLE_CLIENT_ID,
          redirect_uri: CONSOLE,
        });
        expect(token.statusCode).toBe(400);
        // A restart keeps the administrator's choice: the console stays switched off.
        const env = { clock: () => new Date(), newId: () => crypto.randomUUID(), fhirBase: AUD };
        await ensureSuperAdmin(t.db, env, t.config.admin);
        const after = await readConsoleClient();
        expect((after.json() as { status?: string }).status).toBe('off');
      } finally {
        const on = await writeConsoleClient({ ...(read.json() as object), status: 'active' });
        expect(on.statusCode, on.body).toBe(200);
      }
    });
  });
});
