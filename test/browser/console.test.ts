// The admin console in a real Chromium (issue 17): sign in through the server's sign-in page, invite a user and
// deactivate a membership, start an export and cancel it (and see the 400 of a completed job), preview and download
// a CSV, browse resources, list Subscriptions with their delivery state; every page passes axe-core without serious or critical violations and fits 375 px.
// Screenshots go to artifacts/screenshots/ (CONSOLE_DOCS_SCREENSHOTS=1 also refreshes the README's docs/*.png).
// Runs where Debian's Chromium is installed; elsewhere the suite says why it did not run.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inviteRequest, setUserPassword, startTestApp, type TestApp } from '../support/app.js';
import { ensureConsoleBuilt } from '../support/console-build.js';
import { CHROMIUM, HAVE_CHROMIUM, launchChromium } from '../support/chromium.js';
import { testDatabases } from '../support/db.js';
import { freePort } from '../support/listen.js';

const PASSWORD = 'a long and correct password';
const AXE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const SHOTS = path.resolve('artifacts/screenshots');
const DOCS = process.env.CONSOLE_DOCS_SCREENSHOTS === '1' ? path.resolve('docs') : undefined;
const PATIENTS = 30;
/** The Patients made here and the one the test invites (Pia). */
const ALL_PATIENTS = PATIENTS + 1;

describe('console browser tests', () => {
  it('run where Chromium is installed', () => {
    // Not a skip in disguise: this states why the console suite below did or did not run.
    if (!HAVE_CHROMIUM)
      console.info(
        `Console browser tests did not run: no Chromium at ${CHROMIUM} (apt-get install -y chromium)`,
      );
    expect(typeof HAVE_CHROMIUM).toBe('boolean');
  });
});

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core's serious and critical violations on the page as it is now (its source evaluated, not a script tag: CSP). */
async function axeProblems(page: Page): Promise<string[]> {
  await page.evaluate(AXE);
  const violations = (await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (c: Document) => Promise<{ violations: unknown[] }> } })
      .axe;
    return (await axe.run(document)).violations;
  })) as AxeViolation[];
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join('; ')}`);
}

/** Horizontal overflow of the page at its current viewport, in pixels (0 when it fits). */
const overflow = (page: Page): Promise<number> =>
  page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

describe.runIf(HAVE_CHROMIUM).each(testDatabases().slice(-1))(
  'admin console in Chromium on $name',
  (database) => {
    let t: TestApp;
    let base = '';
    let browser: Browser;
    let page: Page;
    let projectId = '';
    let projectToken = '';
    /** While true, export jobs wait after each chunk: an export stays `accepted` until the test lets it go. */
    let hold = false;
    const consoleErrors: string[] = [];
    /** A rest-hook receiver (API.md §8): the X-Cinder-Subscription header of each request it got, in order. */
    let receiver: http.Server | undefined;
    let hookUrl = '';
    const received: (string | undefined)[] = [];

    const shot = async (name: string, docs = false) => {
      fs.mkdirSync(SHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
      if (docs && DOCS) await page.screenshot({ path: path.join(DOCS, `${name}.png`) });
    };

    /** axe-core at desktop width, then no horizontal overflow at 375 px (with a screenshot there). */
    const checkPage = async (name: string) => {
      expect(await axeProblems(page), `${name}: axe`).toEqual([]);
      await page.setViewportSize({ width: 375, height: 800 });
      await page.waitForTimeout(100);
      expect(await overflow(page), `${name}: overflow at 375 px`).toBeLessThanOrEqual(0);
      await shot(`${name}-375`);
      await page.setViewportSize({ width: 1280, height: 860 });
    };

    const nav = async (label: string, heading: string) => {
      await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: label }).click();
      await page.getByRole('heading', { level: 1, name: heading }).waitFor();
    };

    const api = (method: string, url: string, payload?: unknown) =>
      t.request({ method: method as 'GET', url, token: projectToken, ...(payload ? { payload } : {}) });

    beforeAll(async () => {
      const consoleDir = await ensureConsoleBuilt();
      const port = await freePort();
      base = `http://127.0.0.1:${port}/`;
      receiver = http.createServer((req, res) => {
        req.resume();
        req.on('end', () => {
          received.push(req.headers['x-cinder-subscription'] as string | undefined);
          res.writeHead(200).end();
        });
      });
      await new Promise<void>((r) => receiver?.listen(0, '127.0.0.1', r));
      hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      t = await startTestApp(
        database,
        // The receiver is on loopback: allowed for rest-hook endpoints (API.md §2 outbound rule).
        { baseUrl: base, allowedOutboundHosts: ['127.0.0.1'] },
        {
          consoleDir,
          deliver: { pollMs: 50 },
          jobs: {
            exportPageSize: 10,
            afterChunk: async () => {
              while (hold) await new Promise((r) => setTimeout(r, 50));
            },
          },
        },
      );
      await t.app.listen({ port, host: '127.0.0.1' });
      const p = await t.newProject('Demo Clinic');
      projectId = p.projectId;
      projectToken = p.adminToken;
      const invited = await inviteRequest(t, p.adminToken, projectId, {
        resourceType: 'Practitioner',
        firstName: 'Ada',
        lastName: 'Admin',
        email: 'ada@console.example',
        admin: true,
      });
      expect(invited.statusCode, invited.body).toBe(200);
      const userId = (invited.json() as { user: { reference: string } }).user.reference.split(
        '/',
      )[1] as string;
      await setUserPassword(t, userId, PASSWORD);
      for (let i = 0; i < PATIENTS; i++) {
        const res = await api('POST', `${t.fhir}/Patient`, {
          resourceType: 'Patient',
          name: [{ given: [`Given${String(i).padStart(2, '0')}`], family: i % 2 ? 'Lee' : 'Smith' }],
          gender: i % 2 ? 'female' : 'male',
          birthDate: `19${50 + i}-04-01`,
        });
        expect(res.statusCode).toBe(201);
      }
      browser = await launchChromium();
      const context = await browser.newContext({
        viewport: { width: 1280, height: 860 },
        acceptDownloads: true,
      });
      page = await context.newPage();
      page.on('console', (m) => {
        if (m.type() === 'error') consoleErrors.push(m.text());
      });
    });
    afterAll(async () => {
      hold = false;
      await browser?.close();
      await t?.close();
      await new Promise((r) => (receiver ? receiver.close(r) : r(undefined)));
    });

    it('signs in through the sign-in page (PKCE, public client) and keeps only tokens in sessionStorage', async () => {
      await page.goto(`${base}console/`);
      await page.getByRole('button', { name: 'Sign in' }).waitFor();
      await checkPage('console-signin');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(/\/oauth2\/authorize/);
      expect(await axeProblems(page), 'sign-in page: axe').toEqual([]);
      await page.fill('#email', 'ada@console.example');
      await page.fill('#password', PASSWORD);
      await page.click('button[type=submit]:not([name=cancel])');
      await page.getByRole('heading', { level: 1, name: 'People' }).waitFor({ timeout: 20_000 });
      expect(new URL(page.url()).search).toBe(''); // the code and state are gone from the address bar
      await expect.poll(() => page.getByText('Ada Admin · Demo Clinic (admin)').count()).toBe(1);
      const storage = await page.evaluate(() => ({
        local: Object.keys(localStorage),
        session: Object.fromEntries(Object.keys(sessionStorage).map((k) => [k, sessionStorage.getItem(k)])),
      }));
      expect(storage.local).toEqual([]);
      expect(Object.keys(storage.session)).toEqual(['cinder.console.session']);
      expect(Object.keys(JSON.parse(storage.session['cinder.console.session'] as string)).sort()).toEqual([
        'accessToken',
        'expiresAt',
        'refreshToken',
      ]);
    });

    it('invites a Patient with an email and externalId, then deactivates the membership', async () => {
      await page.getByLabel('Profile type').selectOption('Patient');
      await page.getByLabel('First name').fill('Pia');
      await page.getByLabel('Last name').fill('Patient');
      await page.getByLabel('Email').fill('pia@console.example');
      await page.getByLabel('External id').fill('idp|pia');
      await page.getByRole('button', { name: 'Invite', exact: true }).click();
      await page.getByText(/^Invited Pia Patient: ProjectMembership\//).waitFor();
      const row = page.getByRole('row').filter({ hasText: 'idp|pia' });
      await expect.poll(() => row.count()).toBe(1);
      const members = await api('GET', `${t.fhir}/ProjectMembership?external-id=idp|pia`);
      const m = (members.json() as { entry: { resource: { id: string; active?: boolean } }[] }).entry;
      expect(m).toHaveLength(1);
      // A second invite with the same externalId shows the server's 409 OperationOutcome.
      await page.getByLabel('First name').fill('Pia');
      await page.getByLabel('Last name').fill('Again');
      await page.getByLabel('External id').fill('idp|pia');
      await page.getByRole('button', { name: 'Invite', exact: true }).click();
      await page
        .getByRole('alert')
        .filter({ hasText: /idp\|pia|externalId|already/i })
        .waitFor();
      await shot('console-people');
      await checkPage('console-people');
      await row.getByRole('button', { name: /^Deactivate/ }).click();
      await page.getByText(`Deactivated ProjectMembership/${m[0]?.resource.id ?? ''}`).waitFor();
      await expect.poll(() => row.getByText('inactive').count()).toBe(1);
      const after = await api('GET', `${t.fhir}/ProjectMembership/${m[0]?.resource.id ?? ''}`);
      expect((after.json() as { active?: boolean }).active).toBe(false);
    });

    it('creates a ClientApplication and shows its new secret once', async () => {
      await nav('Applications', 'Applications');
      await page.getByLabel('Name', { exact: true }).fill('Warehouse');
      await page.getByLabel('Redirect URI').fill('https://warehouse.example/cb');
      await page.getByLabel('Launch URI').fill('https://warehouse.example/launch');
      await page.getByLabel('Membership').selectOption('member');
      await page.getByRole('button', { name: 'Create application' }).click();
      const secret = page.locator('code.secret');
      await secret.waitFor();
      expect((await secret.textContent())?.length).toBeGreaterThan(20);
      await expect
        .poll(() => page.getByRole('cell', { name: 'https://warehouse.example/cb' }).count())
        .toBe(1);
      await checkPage('console-applications');
      await page.reload();
      await page.getByRole('heading', { level: 1, name: 'Applications' }).waitFor();
      expect(await page.locator('code.secret').count()).toBe(0);
    });

    it('starts a SMART EHR launch of an application for a patient, and shows the server refusing an unknown one', async () => {
      const found = await api('GET', `${t.fhir}/Patient?name=Smith&_count=1`);
      const patientId =
        (found.json() as { entry: { resource: { id: string } }[] }).entry[0]?.resource.id ?? '';
      const form = page.locator('form[aria-labelledby="launch-title"]');
      await form.getByLabel('Application').selectOption({ label: 'Warehouse' });
      await form.getByLabel('Patient id').fill(`Patient/${patientId}`);
      await form.getByRole('button', { name: 'Launch', exact: true }).click();
      const link = page.locator('#launch-link');
      await link.waitFor();
      const href = new URL((await link.getAttribute('href')) ?? '');
      expect(`${href.origin}${href.pathname}`).toBe('https://warehouse.example/launch');
      expect(href.searchParams.get('iss')).toBe(`${base}fhir/R4`);
      expect(href.searchParams.get('launch')).toMatch(/^[A-Za-z0-9_-]{32,}$/);
      expect(await link.getAttribute('rel')).toBe('noopener noreferrer');
      await checkPage('console-applications-launch');
      await form.getByLabel('Patient id').fill('no-such-patient');
      await form.getByRole('button', { name: 'Launch', exact: true }).click();
      await form
        .getByRole('alert')
        .filter({ hasText: /not found/i })
        .waitFor();
      expect(await page.locator('#launch-link').count()).toBe(0);
    });

    it('starts an export, shows its progress and cancels it (200), then shows the 400 of a completed job', async () => {
      await nav('Jobs', 'Jobs');
      hold = true;
      await page.getByRole('button', { name: 'Start bulk export' }).click();
      const started = page.getByText(/^Export started: /);
      await started.waitFor();
      const jobId = ((await started.textContent()) ?? '').replace('Export started: ', '').trim();
      const row = page.locator(`tr[data-job="${jobId}"]`);
      await row.waitFor();
      await expect.poll(() => row.locator('td.status').textContent()).toBe('accepted');
      // The progress column shows the status endpoint's X-Progress while the job runs.
      await expect.poll(() => row.locator('td.progress').textContent()).toMatch(/\w/);
      await shot('console-jobs-running');
      await row.getByRole('button', { name: `Cancel job ${jobId}` }).click();
      await row.getByText(/^200: /).waitFor();
      await expect.poll(() => row.locator('td.status').textContent(), { timeout: 10_000 }).toBe('cancelled');
      hold = false;
      const job = await api('GET', `${t.fhir}/AsyncJob/${jobId}`);
      expect((job.json() as { status: string }).status).toBe('cancelled');

      // A completed export: its output links download the NDJSON, and Cancel shows the server's 400.
      const kick = await t.request({
        method: 'GET',
        url: `${t.fhir}/$export?_type=Patient`,
        token: projectToken,
        headers: { prefer: 'respond-async', accept: 'application/fhir+json' },
      });
      expect(kick.statusCode, kick.body).toBe(202);
      const doneId = (kick.headers['content-location'] as string).split('/').pop() as string;
      await expect
        .poll(
          async () =>
            ((await api('GET', `${t.fhir}/AsyncJob/${doneId}`)).json() as { status: string }).status,
          {
            timeout: 30_000,
          },
        )
        .toBe('completed');
      await page.getByRole('button', { name: 'Refresh' }).click();
      const done = page.locator(`tr[data-job="${doneId}"]`);
      await expect.poll(() => done.locator('td.status').textContent()).toBe('completed');
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        done.getByRole('button', { name: 'Patient.ndjson' }).click(),
      ]);
      const ndjson = fs
        .readFileSync(await download.path(), 'utf8')
        .trim()
        .split('\n');
      expect(ndjson).toHaveLength(ALL_PATIENTS);
      expect((JSON.parse(ndjson[0] as string) as { resourceType: string }).resourceType).toBe('Patient');
      await done.getByRole('button', { name: `Cancel job ${doneId}` }).click();
      await done
        .getByText(
          "400: AsyncJob cannot be cancelled if status is not 'accepted', job had status 'completed'",
        )
        .waitFor();
      await shot('console-jobs', true);
      await checkPage('console-jobs');
    });

    it('builds a CSV: columns, a FHIRPath column and a filter, a preview table, export.csv, the bulk export', async () => {
      await nav('CSV builder', 'CSV builder');
      await page.getByLabel('FHIRPath column').fill('name.given.first()');
      await page.getByRole('button', { name: 'Add column' }).click();
      await page.getByRole('button', { name: 'Add filter' }).click();
      await page.getByLabel('Filter 1 parameter').selectOption('gender');
      await page.getByLabel('Filter 1 value').fill('female');
      await page.getByRole('button', { name: 'Preview' }).click();
      const status = page.getByText(/matching Patient resources/);
      await status.waitFor();
      expect(await status.textContent()).toContain(`${PATIENTS / 2} matching Patient resources`);
      const headers = await page.locator('table.preview th').allTextContents();
      expect(headers).toEqual(['id', 'name', 'birthdate', 'name.given.first()']);
      const rows = page.locator('table.preview tbody tr');
      expect(await rows.count()).toBe(PATIENTS / 2);
      expect(await rows.first().locator('td').nth(1).textContent()).toMatch(/^Given\d\d Lee$/);
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByRole('button', { name: 'Download export.csv' }).click(),
      ]);
      expect(download.suggestedFilename()).toBe('export.csv');
      const csv = fs.readFileSync(await download.path(), 'utf8');
      expect(csv.startsWith('\uFEFFid,name,birthdate,name.given.first()\r\n')).toBe(true);
      expect(csv.trim().split('\r\n')).toHaveLength(PATIENTS / 2 + 1);
      await page.getByRole('button', { name: 'Start CSV bulk export' }).click();
      await page.getByText(/^CSV export started as AsyncJob /).waitFor();
      await shot('console-csv', true);
      await checkPage('console-csv');
      // An unknown FHIRPath function: the server's 400 OperationOutcome, word for word.
      await page.getByLabel('FHIRPath column').fill('name.nosuchfunction()');
      await page.getByRole('button', { name: 'Add column' }).click();
      await page.getByRole('button', { name: 'Preview' }).click();
      await page.getByRole('alert').filter({ hasText: 'Invalid FHIRPath expression' }).waitFor();
    });

    it('browses Patients with paging, shows one as JSON and its history', async () => {
      await nav('Resources', 'Resources');
      await page.getByLabel('Resource type').selectOption('Patient');
      await page.getByText(/on this page/).waitFor();
      expect(await page.locator('tbody tr').count()).toBe(20);
      await page.getByRole('button', { name: 'Next page' }).click();
      await expect.poll(() => page.locator('tbody tr').count()).toBe(ALL_PATIENTS - 20);
      await page.getByRole('button', { name: 'Previous page' }).click();
      await expect.poll(() => page.locator('tbody tr').count()).toBe(20);
      await checkPage('console-resources');
      const first = page.locator('tbody tr a').first();
      const id = (await first.textContent()) as string;
      await first.click();
      await page.getByRole('heading', { name: `Patient/${id} (version 1)` }).waitFor();
      const json = JSON.parse((await page.locator('pre.json').textContent()) as string) as { id: string };
      expect(json.id).toBe(id);
      await page.getByRole('button', { name: 'Show history' }).click();
      await page.getByRole('button', { name: 'Version 1' }).waitFor();
      // $validate against the base profile (offered first: the Patient declares none), then an unknown one.
      const profile = page.getByLabel('Profile');
      expect(await profile.inputValue()).toBe('http://hl7.org/fhir/StructureDefinition/Patient');
      await page.getByRole('button', { name: 'Validate' }).click();
      const issues = page.getByRole('table', { name: 'Validation issues' });
      // The base profile's invariants: dom-6 (no narrative) is a warning, and nothing is an error.
      await issues.locator('tr.issue-warning').filter({ hasText: 'dom-6' }).waitFor();
      expect(await issues.locator('tr.issue-error').count()).toBe(0);
      await profile.fill('http://example.org/StructureDefinition/nobody-knows');
      await page.getByRole('button', { name: 'Validate' }).click();
      await issues.locator('tr.issue-error').filter({ hasText: 'nobody-knows' }).waitFor();
      await checkPage('console-resource');
      // A deep link opens the same page after a reload (the server's single-page fallback).
      await page.reload();
      await page.getByRole('heading', { name: `Patient/${id} (version 1)` }).waitFor();
      expect(consoleErrors.filter((e) => !/status of (400|404|409)/.test(e))).toEqual([]);
    });

    /** Subscriptions made through the API for the Subscriptions page (ids set by the first test below). */
    const subs = { hook: '', off: '' };
    const storedStatus = async (id: string): Promise<string> =>
      ((await api('GET', `${t.fhir}/Subscription/${id}`)).json() as { status: string }).status;
    const subRow = (id: string) => page.locator(`tr[data-subscription="${id}"]`);

    it('lists the Subscriptions made through the API with their criteria, channel and status', async () => {
      const hook = await api('POST', `${t.fhir}/Subscription`, {
        resourceType: 'Subscription',
        status: 'requested',
        reason: 'Heart rates to the ward',
        criteria: 'Observation?code=http://loinc.org|8867-4',
        channel: { type: 'rest-hook', endpoint: hookUrl, payload: 'application/fhir+json' },
      });
      expect(hook.statusCode, hook.body).toBe(201);
      subs.hook = (hook.json() as { id: string }).id;
      const off = await api('POST', `${t.fhir}/Subscription`, {
        resourceType: 'Subscription',
        status: 'off',
        reason: 'Switched off',
        criteria: 'Patient?gender=female',
        channel: { type: 'websocket' },
      });
      expect(off.statusCode, off.body).toBe(201);
      subs.off = (off.json() as { id: string }).id;

      await nav('Subscriptions', 'Subscriptions');
      const row = subRow(subs.hook);
      await row.waitFor();
      expect(await row.textContent()).toContain('Heart rates to the ward');
      expect(await row.getByText('Observation?code=http://loinc.org|8867-4').count()).toBe(1);
      expect(await row.getByText('rest-hook').count()).toBe(1);
      expect(await row.getByText(hookUrl).count()).toBe(1);
      // The status shown is the stored one (a classic rest-hook one may turn active as soon as it is saved).
      await expect
        .poll(
          async () => {
            const shown = await row.locator('span.status').textContent();
            const stored = await storedStatus(subs.hook);
            if (shown !== stored) await page.getByRole('button', { name: 'Refresh' }).click();
            return shown === stored ? shown : `shown ${shown}, stored ${stored}`;
          },
          { timeout: 15_000 },
        )
        .toMatch(/^(requested|active)$/);
      const offRow = subRow(subs.off);
      expect(await offRow.locator('span.status').textContent()).toBe('off');
      expect(await offRow.getByText('websocket').count()).toBe(1);
      // Most recently changed first.
      const order = await page
        .locator('tr[data-subscription]')
        .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-subscription')));
      expect(order.slice(0, 2)).toEqual([subs.off, subs.hook]);
      await row
        .getByRole('button', { name: `Send test notification for subscription ${subs.hook}` })
        .waitFor();
      await shot('console-subscriptions');
      await checkPage('console-subscriptions');
    });

    it("shows what $status answers and $test-notification's 202 and 4xx, as the contract says (answers stubbed in the browser)", async () => {
      // The page against the contract of API.md §8 and the lead's brief, whatever the server does yet: these two
      // operations' answers are given by the browser, everything else by the server.
      const statusOf = (id: string) => ({
        resourceType: 'Parameters',
        extension: [
          {
            url: 'https://cinder.dev/fhir/StructureDefinition/subscription-last-delivery',
            valueInstant: '2026-03-04T05:06:07Z',
          },
          { url: 'https://cinder.dev/fhir/StructureDefinition/subscription-pending-events', valueInteger: 4 },
        ],
        parameter: [
          { name: 'subscription', valueReference: { reference: `Subscription/${id}` } },
          { name: 'status', valueCode: id === subs.off ? 'off' : 'error' },
          { name: 'type', valueCode: 'query-status' },
          { name: 'events-since-subscription-start', valueString: '17' },
          { name: 'error', valueCodeableConcept: { text: 'The endpoint answered 503' } },
        ],
      });
      const outcome = (severity: string, code: string, diagnostics: string) =>
        JSON.stringify({ resourceType: 'OperationOutcome', issue: [{ severity, code, diagnostics }] });
      await page.route(/\/Subscription\/[^/]+\/\$status$/, (route) =>
        route.fulfill({
          status: 200,
          contentType: 'application/fhir+json',
          body: JSON.stringify(statusOf(/Subscription\/([^/]+)\//.exec(route.request().url())?.[1] ?? '')),
        }),
      );
      await page.route(/\/Subscription\/[^/]+\/\$test-notification$/, (route) => {
        const off = route.request().url().includes(`/Subscription/${subs.off}/`);
        return route.fulfill({
          status: off ? 422 : 202,
          contentType: 'application/fhir+json',
          body: off
            ? outcome('error', 'business-rule', 'Subscription is off: nothing is sent')
            : outcome('information', 'informational', 'Test notification queued'),
        });
      });
      try {
        await page.getByRole('button', { name: 'Refresh' }).click();
        const row = subRow(subs.hook);
        await expect.poll(() => row.locator('td.events').textContent()).toBe('17');
        expect(await row.locator('td.pending').textContent()).toBe('4');
        expect(await row.locator('td.last-delivery').textContent()).not.toBe('—');
        expect(await row.locator('td.last-error').textContent()).toBe('The endpoint answered 503');
        expect(await row.locator('span.status').textContent()).toBe('error');
        await row
          .getByRole('button', { name: `Send test notification for subscription ${subs.hook}` })
          .click();
        await row.getByRole('status').filter({ hasText: '202: Test notification queued' }).waitFor();
        const offRow = subRow(subs.off);
        await offRow
          .getByRole('button', { name: `Send test notification for subscription ${subs.off}` })
          .click();
        await offRow
          .getByRole('status')
          .filter({ hasText: '422: Subscription is off: nothing is sent' })
          .waitFor();
        await shot('console-subscriptions-status');
        await checkPage('console-subscriptions-status');
      } finally {
        await page.unrouteAll();
      }
    });

    // Against the server's own $status and $test-notification (API.md §8) and a real delivery.
    it('shows the delivery state from the server and sends a real test notification', async () => {
      await expect.poll(() => storedStatus(subs.hook), { timeout: 15_000 }).toBe('active');
      const obs = await api('POST', `${t.fhir}/Observation`, {
        resourceType: 'Observation',
        status: 'final',
        code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
      });
      expect(obs.statusCode, obs.body).toBe(201);
      await expect.poll(() => received.filter((s) => s === subs.hook).length, { timeout: 15_000 }).toBe(1);
      const row = subRow(subs.hook);
      await expect
        .poll(
          async () => {
            await page.getByRole('button', { name: 'Refresh' }).click();
            return [
              await row.locator('td.events').textContent(),
              await row.locator('td.pending').textContent(),
            ].join(' ');
          },
          { timeout: 15_000 },
        )
        .toBe('1 0');
      expect(await row.locator('td.last-delivery').textContent()).not.toBe('—');
      expect(await row.locator('td.last-error').textContent()).toBe('—');
      expect(await row.locator('span.status').textContent()).toBe('active');
      expect(await row.getByText(/Delivery state unavailable/).count()).toBe(0);
      await row.getByRole('button', { name: `Send test notification for subscription ${subs.hook}` }).click();
      await row
        .getByRole('status')
        .filter({ hasText: /^202: / })
        .waitFor();
      await expect.poll(() => received.filter((s) => s === subs.hook).length, { timeout: 15_000 }).toBe(2);
      // A 4xx shows the server's OperationOutcome word for word: the Subscription is deleted under the page.
      const offRow = subRow(subs.off);
      expect((await api('DELETE', `${t.fhir}/Subscription/${subs.off}`)).statusCode).toBeLessThan(300);
      const direct = await api('POST', `${t.fhir}/Subscription/${subs.off}/$test-notification`);
      expect(direct.statusCode).toBeGreaterThanOrEqual(400);
      const issue = (direct.json() as { issue: { diagnostics?: string; details?: { text?: string } }[] })
        .issue[0];
      const diagnostics = issue?.diagnostics ?? issue?.details?.text ?? '';
      await offRow
        .getByRole('button', { name: `Send test notification for subscription ${subs.off}` })
        .click();
      await offRow
        .getByRole('status')
        .filter({ hasText: `${direct.statusCode}: ${diagnostics}` })
        .waitFor();
    });

    /** AuditEvents POSTed for the Audit page (API.md §10: clients may create their own), and whom they name. */
    const audit = { paula: '', quinn: '', pat1: '', pat2: '', client: '' };
    const DCM = 'http://dicom.nema.org/resources/ontology/DCM';
    /** The three events of February 2026 (noon UTC: the same local day in any browser zone within ±11 h). */
    const FEB = {
      read: '2026-02-10T12:00:00.000Z',
      update: '2026-02-20T12:00:00.000Z',
      login: '2026-02-21T12:00:00.000Z',
    };
    const SEARCHES = 55;
    const auditEvent = (o: {
      recorded: string;
      subtype: { system: string; code: string; display: string };
      action: string;
      outcome: string;
      outcomeDesc?: string;
      who: Record<string, unknown>;
      entity?: unknown[];
      login?: boolean;
    }) => ({
      resourceType: 'AuditEvent',
      type: o.login
        ? { system: DCM, code: '110114', display: 'User Authentication' }
        : {
            system: 'http://terminology.hl7.org/CodeSystem/audit-event-type',
            code: 'rest',
            display: 'Restful Operation',
          },
      subtype: [o.subtype],
      action: o.action,
      recorded: o.recorded,
      outcome: o.outcome,
      ...(o.outcomeDesc ? { outcomeDesc: o.outcomeDesc } : {}),
      agent: [
        {
          type: { coding: [{ system: DCM, code: '110153', display: 'Source Role ID' }] },
          who: o.who,
          requestor: true,
          network: { address: '127.0.0.1', type: '2' },
        },
        {
          type: { coding: [{ system: DCM, code: '110152', display: 'Destination Role ID' }] },
          who: { display: `${base}fhir/R4` },
          requestor: false,
        },
      ],
      source: {
        observer: { display: base },
        type: [
          {
            system: 'http://terminology.hl7.org/CodeSystem/security-source-type',
            code: '4',
            display: 'Application Server',
          },
        ],
      },
      ...(o.entity ? { entity: o.entity } : {}),
    });
    const rest = (code: string) => ({
      system: 'http://hl7.org/fhir/restful-interaction',
      code,
      display: code,
    });
    const entity = (reference: string, type: string, role: string) => ({
      what: { reference },
      type: { system: 'http://terminology.hl7.org/CodeSystem/audit-entity-type', code: type },
      role: { system: 'http://terminology.hl7.org/CodeSystem/object-role', code: role },
    });
    const applyFilters = async (f: { from?: string; to?: string; agent?: string; patient?: string }) => {
      await page.getByLabel('From', { exact: true }).fill(f.from ?? '');
      await page.getByLabel('To', { exact: true }).fill(f.to ?? '');
      await page.getByLabel('Agent', { exact: true }).fill(f.agent ?? '');
      await page.getByLabel('Patient', { exact: true }).fill(f.patient ?? '');
      await page.getByRole('button', { name: 'Apply filters' }).click();
    };
    /** The Who column of the rows shown, once the page shows `expected` (stale rows of the last filters may linger). */
    const expectWho = async (expected: string[], more = false) => {
      const who = () => page.locator('tr[data-audit] td.who strong').allTextContents();
      await expect.poll(who).toEqual(expected);
      const n = expected.length;
      await page
        .getByRole('status')
        .filter({ hasText: new RegExp(`^${n} events? shown${more ? ', more to load' : ''}`) })
        .waitFor();
    };

    it('lists AuditEvents: who, what, which resources and patients, the outcome in words, newest first', async () => {
      const created = async (resource: Record<string, unknown>): Promise<string> => {
        const res = await api('POST', `${t.fhir}/${resource.resourceType as string}`, resource);
        expect(res.statusCode, res.body).toBe(201);
        return (res.json() as { id: string }).id;
      };
      audit.paula = await created({
        resourceType: 'Practitioner',
        name: [{ given: ['Paula'], family: 'Reader' }],
      });
      audit.quinn = await created({
        resourceType: 'Practitioner',
        name: [{ given: ['Quinn'], family: 'Writer' }],
      });
      const patients = (await api('GET', `${t.fhir}/Patient?_count=2`)).json() as {
        entry: { resource: { id: string } }[];
      };
      audit.pat1 = patients.entry[0]?.resource.id ?? '';
      audit.pat2 = patients.entry[1]?.resource.id ?? '';
      const clients = (await api('GET', `${t.fhir}/ClientApplication?name=Warehouse`)).json() as {
        entry: { resource: { id: string } }[];
      };
      audit.client = clients.entry[0]?.resource.id ?? '';
      expect([audit.pat1, audit.pat2, audit.client].every(Boolean)).toBe(true);

      await created(
        auditEvent({
          recorded: FEB.read,
          subtype: rest('read'),
          action: 'R',
          outcome: '0',
          who: { reference: `Practitioner/${audit.paula}`, display: 'Paula Reader' },
          entity: [
            entity(`Observation/obs-1/_history/2`, '2', '4'),
            entity(`Patient/${audit.pat1}`, '1', '1'),
          ],
        }),
      );
      await created(
        auditEvent({
          recorded: FEB.update,
          subtype: rest('update'),
          action: 'U',
          outcome: '4',
          outcomeDesc: 'Version conflict: expected version 2',
          who: { reference: `Practitioner/${audit.quinn}`, display: 'Quinn Writer' },
          entity: [
            entity(`Patient/${audit.pat2}/_history/3`, '2', '4'),
            entity(`Patient/${audit.pat2}`, '1', '1'),
          ],
        }),
      );
      await created(
        auditEvent({
          recorded: FEB.login,
          login: true,
          subtype: { system: DCM, code: '110122', display: 'Login' },
          action: 'E',
          outcome: '4',
          outcomeDesc: 'Invalid email or password',
          who: { identifier: { value: 'mallory@console.example' } },
        }),
      );
      // A busy application's searches in January: more than a page of them.
      for (let i = 0; i < SEARCHES; i++) {
        await created(
          auditEvent({
            recorded: `2026-01-05T10:${String(i).padStart(2, '0')}:00.000Z`,
            subtype: rest('search'),
            action: 'E',
            outcome: '0',
            who: { reference: `ClientApplication/${audit.client}`, display: 'Warehouse' },
            entity: [
              {
                type: { system: 'http://terminology.hl7.org/CodeSystem/audit-entity-type', code: '2' },
                role: { system: 'http://terminology.hl7.org/CodeSystem/object-role', code: '24' },
                query: Buffer.from(`gender=female&_count=${i + 1}`).toString('base64'),
              },
            ],
          }),
        );
      }

      await nav('Audit', 'Audit');
      await page
        .getByText(/^Every request to the FHIR API, sign-ins and admin actions are recorded/)
        .waitFor();
      expect(await page.getByText(/As a super administrator/).count()).toBe(0);
      // Unfiltered: a first page (once the server records every request, the newest are the test's own).
      await page
        .getByRole('status')
        .filter({ hasText: /events? shown/ })
        .waitFor();
      expect(await page.locator('tr[data-audit]').count()).toBeGreaterThan(0);
      expect(await page.locator('tr[data-audit]').count()).toBeLessThanOrEqual(50);

      // February: the three events, newest first, as people read them.
      await applyFilters({ from: '2026-02-01', to: '2026-02-28' });
      await expectWho(['mallory@console.example', 'Quinn Writer', 'Paula Reader']);
      const [login, update, read] = [0, 1, 2].map((i) => page.locator('tr[data-audit]').nth(i));
      expect(await login?.locator('td.who').textContent()).toContain('tried mallory@console.example');
      expect(await login?.locator('td.what').textContent()).toContain('Sign-in');
      expect(await login?.locator('td.outcome').textContent()).toBe(
        'Client error (4xx)Invalid email or password',
      );
      expect(await update?.locator('td.what').textContent()).toBe('updateUpdate');
      expect(await update?.locator('td.resources').textContent()).toBe(`Patient/${audit.pat2}/_history/3`);
      expect(await update?.locator('td.patients').textContent()).toBe(`Patient/${audit.pat2}`);
      expect(await update?.locator('td.outcome').textContent()).toContain('Version conflict');
      expect(await read?.locator('td.who').textContent()).toContain(`Practitioner/${audit.paula}`);
      expect(await read?.locator('td.what').textContent()).toBe('readRead');
      expect(await read?.locator('td.resources').textContent()).toBe('Observation/obs-1/_history/2');
      expect(await read?.locator('td.patients').textContent()).toBe(`Patient/${audit.pat1}`);
      expect(await read?.locator('td.outcome').textContent()).toBe('Success');
      await shot('console-audit');
      await checkPage('console-audit');
    });

    it('filters the audit trail by agent, date and patient, and loads more pages', async () => {
      // By agent: only that agent's rows, whatever their date.
      await applyFilters({ agent: `Practitioner/${audit.paula}` });
      await expectWho(['Paula Reader']);
      await applyFilters({ agent: `Practitioner/${audit.quinn}` });
      await expectWho(['Quinn Writer']);
      // By date: from the 15th, Paula's read of the 10th is excluded.
      await applyFilters({ from: '2026-02-15', to: '2026-02-28' });
      await expectWho(['mallory@console.example', 'Quinn Writer']);
      // Up to the 20th inclusive (the whole day), the sign-in of the 21st is excluded.
      await applyFilters({ from: '2026-02-01', to: '2026-02-20' });
      await expectWho(['Quinn Writer', 'Paula Reader']);
      // By patient (a bare id), within February.
      await applyFilters({ from: '2026-02-01', to: '2026-02-28', patient: audit.pat1 });
      await expectWho(['Paula Reader']);
      await applyFilters({ from: '2026-02-01', to: '2026-02-28', patient: `Patient/${audit.pat2}` });
      await expectWho(['Quinn Writer']);
      // A real access, recorded by the server itself (no seeded event): reading the patient through the API puts a
      // Read of that patient, with its outcome, first on the patient's audit trail.
      const read = await api('GET', `${t.fhir}/Patient/${audit.pat1}`);
      expect(read.statusCode).toBe(200);
      await expect
        .poll(async () => {
          await t.app.flushAudit?.();
          const r = await api('GET', `${t.fhir}/AuditEvent?patient=${audit.pat1}&subtype=read&_count=1`);
          return ((r.json() as { entry?: unknown[] }).entry ?? []).length;
        })
        .toBe(1);
      await applyFilters({ patient: audit.pat1 });
      const newest = page.locator('tr[data-audit]').first();
      await expect.poll(() => newest.locator('td.what').textContent()).toMatch(/read/i);
      await expect.poll(() => newest.locator('td.patients').textContent()).toContain(`Patient/${audit.pat1}`);
      await expect.poll(() => newest.locator('td.outcome').textContent()).toMatch(/Success/);
      // A "to" day before the "from" day is refused before anything is sent.
      await applyFilters({ from: '2026-02-20', to: '2026-02-10' });
      await page.getByRole('alert').filter({ hasText: 'The "to" date is before the "from" date.' }).waitFor();
      // More than a page: "Load more" follows the next link until there is none.
      await applyFilters({ agent: `ClientApplication/${audit.client}` });
      await expectWho(Array<string>(50).fill('Warehouse'), true);
      const counts = async () =>
        (await page.locator('tr[data-audit] td.resources').allTextContents()).map((q) =>
          Number(/^Query: gender=female&_count=(\d+)$/.exec(q)?.[1]),
        );
      const descending = (xs: number[]) => [...xs].sort((a, b) => b - a);
      const firstPage = await counts();
      expect(firstPage).toEqual(descending(firstPage));
      await page.getByRole('button', { name: 'Load more' }).click();
      await expectWho(Array<string>(SEARCHES).fill('Warehouse'));
      expect(await page.getByRole('button', { name: 'Load more' }).count()).toBe(0);
      // Every search once, newest first (the searches' recorded minute is their _count).
      expect(await counts()).toEqual(Array.from({ length: SEARCHES }, (_, i) => SEARCHES - i));
      await checkPage('console-audit-more');
      // Clearing the filters shows the unfiltered first page again.
      await page.getByRole('button', { name: 'Clear filters' }).click();
      await page
        .getByRole('status')
        .filter({ hasText: /^\d+ events? shown(, more to load)?\.$/ })
        .waitFor();
      expect(await page.getByLabel('Agent', { exact: true }).inputValue()).toBe('');
    });

    it('lets a super administrator create a project, invite into it, set a password and create a resource', async () => {
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(/\/oauth2\/authorize/);
      await page.fill('#email', 'admin@example.com');
      await page.fill('#password', 'admin-password-1');
      await page.click('button[type=submit]:not([name=cancel])');
      await page.getByText(/\(super admin\)/).waitFor({ timeout: 20_000 });
      // Signing in again returns to the page where it started (the Audit page, the tests above).
      expect(new URL(page.url()).pathname).toBe('/console/audit');
      await nav('People', 'People');
      await page.getByLabel('Project name').fill('Second Clinic');
      await page.getByRole('button', { name: 'Create project' }).click();
      const select = page.getByLabel('Project', { exact: true });
      await expect
        .poll(() => select.evaluate((s) => (s as HTMLSelectElement).selectedOptions[0]?.textContent))
        .toBe('Second Clinic');
      const projects = await t.request({
        method: 'GET',
        url: `${t.fhir}/Project?name=Second`,
        token: t.adminToken,
      });
      const second = (projects.json() as { entry: { resource: { id: string } }[] }).entry[0]?.resource
        .id as string;
      expect(second).toBeTruthy();
      await page.getByLabel('First name').fill('Sam');
      await page.getByLabel('Last name').fill('Second');
      await page.getByLabel('Email').fill('sam@console.example');
      await page.getByRole('button', { name: 'Invite', exact: true }).click();
      await page.getByText(/^Invited Sam Second/).waitFor();
      const userSelect = page.getByLabel('User', { exact: true });
      const samValue = await userSelect.locator('option', { hasText: 'Sam Second' }).getAttribute('value');
      await userSelect.selectOption(samValue as string);
      await page.getByLabel('New password').fill('sams long password');
      await page.getByRole('button', { name: 'Set password' }).click();
      await page.getByText(/^Password set for Sam Second/).waitFor();
      await checkPage('console-super-admin');
      const login = await t.request({
        method: 'POST',
        url: '/auth/login',
        headers: { 'content-type': 'application/json' },
        payload: {
          email: 'sam@console.example',
          password: 'sams long password',
          codeChallenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
          codeChallengeMethod: 'S256',
        },
      });
      expect(login.statusCode, login.body).toBe(200);
      await nav('Resources', 'Resources');
      await page.getByLabel('Resource type').selectOption('Patient');
      await page.getByText('New Patient').click();
      await page
        .getByLabel('Patient as JSON')
        .fill('{"resourceType": "Patient", "name": [{"family": "Secondson"}]}');
      await page.getByRole('button', { name: 'Create Patient' }).click();
      const heading = page.getByRole('heading', { name: /^Patient\/.+ \(version 1\)$/ });
      await heading.waitFor();
      const id = /^Patient\/(\S+)/.exec((await heading.textContent()) as string)?.[1] as string;
      const created = await t.request({ method: 'GET', url: `${t.fhir}/Patient/${id}`, token: t.adminToken });
      expect((created.json() as { meta: { project: string } }).meta.project).toBe(second);
    });

    it("shows a super administrator every project's audit events, and says so", async () => {
      await nav('Audit', 'Audit');
      await page
        .getByRole('status')
        .filter({ hasText: /^As a super administrator you see the audit events of every project/ })
        .waitFor();
      // Demo Clinic's events of February, though the project selected is the Second Clinic made above.
      await applyFilters({ from: '2026-02-01', to: '2026-02-28' });
      await expectWho(['mallory@console.example', 'Quinn Writer', 'Paula Reader']);
      await checkPage('console-audit-super-admin');
    });

    it('can be used with the keyboard alone: the skip link and the navigation', async () => {
      await page.goto(`${base}console/people`);
      await page.getByRole('heading', { level: 1, name: 'People' }).waitFor();
      await page.keyboard.press('Tab');
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
      await page.keyboard.press('Tab');
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('People');
      await page.keyboard.press('Tab');
      await page.keyboard.press('Tab');
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Jobs');
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { level: 1, name: 'Jobs' }).waitFor();
      expect(new URL(page.url()).pathname).toBe('/console/jobs');
    });
  },
);
