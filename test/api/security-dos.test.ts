// Denial of service and log forging (issue 12 points 10–12, API.md §1–§5): FHIRPath `trace()` writes nothing to the
// server's output; costly searches and costly `$csv` FHIRPaths end with a 4xx naming the limit while other projects'
// reads keep answering; slow request bodies are cut off, and one client address cannot hold unbounded connections.
// Assertions are on order and on OperationOutcome fields, never on timings.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { toFhirError } from '../../src/http/plugins/errors.js';
import { openPostgres } from '../../src/storage/postgres.js';
import { testDatabases } from '../support/db.js';
import { postResource, startTestApp, type TestApp } from '../support/app.js';
import { connect, type Raw } from '../support/raw-http.js';

type Issue = { severity: string; code: string; details?: { text: string } };
const issue = (res: { json(): unknown }): Issue => (res.json() as { issue: Issue[] }).issue[0] as Issue;

/** `(1|2|...|20)`: 20 numbers; each `U.select(...)` level multiplies the work by 20 (160,000 items: ~20 s). */
const U = `(${Array.from({ length: 20 }, (_, i) => i + 1).join('|')})`;
const MAX_CONNECTIONS = 3;
const FHIRPATH_TIMEOUT = 5000;

/** Sends a GET /healthcheck on the connection and resolves with the first response text. */
async function healthOn(raw: Raw): Promise<string> {
  const before = raw.received().length;
  raw.socket.write('GET /healthcheck HTTP/1.1\r\nHost: x\r\n\r\n');
  for (let i = 0; i < 200 && !/\r\n\r\n/.test(raw.received().slice(before)); i++) {
    if (raw.socket.destroyed) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  return raw.received().slice(before);
}

// 20^6 evaluations (minutes on any machine; about a second per 20^4 here) in little memory: each level counts its
// items, so the deadline (not the heap limit) is what stops it, however fast the machine.
const HOSTILE_FHIRPATH = `1.select(${U}.select(${U}.select(${U}.select(${U}.select(${U}.select(${U}).count()).count()).count()).count()).count()).count()`;

for (const database of testDatabases()) {
  describe(`denial of service and log forging (${database.name})`, () => {
    let t: TestApp;
    let a: { projectId: string; adminToken: string; memberToken: string };
    let b: { projectId: string; adminToken: string; memberToken: string };
    let bPatient: string;

    beforeAll(async () => {
      t = await startTestApp(database, {
        fhirpathTimeout: FHIRPATH_TIMEOUT,
        requestTimeout: 3000,
        maxConnectionsPerClient: MAX_CONNECTIONS,
      });
      a = await t.newProject('DoS A');
      b = await t.newProject('DoS B');
      for (const family of ['Lee', 'Smith', 'Ng']) {
        const res = await postResource(t, a.adminToken, {
          resourceType: 'Patient',
          name: [{ family, given: ['Ann'] }],
        });
        expect(res.statusCode, res.body).toBe(201);
      }
      const res = await postResource(t, b.adminToken, {
        resourceType: 'Patient',
        name: [{ family: 'Other' }],
      });
      bPatient = (res.json() as { id: string }).id;
    });
    afterAll(async () => t?.close());

    const csv = (query: Record<string, string>, token = a.memberToken) =>
      t.request({
        method: 'GET',
        url: `${t.fhir}/Patient/$csv?${new URLSearchParams(query).toString()}`,
        token,
      });

    describe('point 10: log forging', () => {
      it('trace() in a $csv _fields expression writes nothing to stdout or stderr', async () => {
        const written: string[] = [];
        const capture =
          (stream: NodeJS.WriteStream) =>
          (chunk: unknown): boolean => {
            written.push(`${stream === process.stdout ? 'stdout' : 'stderr'}: ${String(chunk)}`);
            return true;
          };
        const out = vi.spyOn(process.stdout, 'write').mockImplementation(capture(process.stdout) as never);
        const err = vi.spyOn(process.stderr, 'write').mockImplementation(capture(process.stderr) as never);
        const log = vi
          .spyOn(console, 'log')
          .mockImplementation((...args) => void written.push(args.join(' ')));
        try {
          const res = await csv({
            _fields:
              'id,name.trace(\'FORGED\\n{"level":60,"msg":"admin logged in"}\').family,name.given.trace(\'x\', family)',
          });
          expect(res.statusCode, res.body).toBe(200);
          // A worker thread's console is piped to this process's streams asynchronously: give it a turn.
          await new Promise((r) => setTimeout(r, 300));
        } finally {
          out.mockRestore();
          err.mockRestore();
          log.mockRestore();
        }
        expect(written.filter((w) => /FORGED|TRACE|Lee|Smith/.test(w))).toEqual([]);
      });
    });

    describe('point 11: costly searches', () => {
      const search = (query: URLSearchParams, token = a.memberToken) =>
        t.request({ method: 'GET', url: `${t.fhir}/Patient?${query.toString()}`, token });
      const contains = (n: number): URLSearchParams =>
        new URLSearchParams(Array.from({ length: n }, (_, i) => ['name:contains', `x${i}`]));

      it('answers 400 too-costly naming the limit for 100 :contains filters (GET and POST _search)', async () => {
        const get = await search(contains(100));
        expect(get.statusCode, get.body).toBe(400);
        expect(issue(get).code).toBe('too-costly');
        expect(issue(get).details?.text).toMatch(/100 filter parameters .*at most 12 per search/);
        const post = await t.request({
          method: 'POST',
          url: `${t.fhir}/Patient/_search`,
          token: a.memberToken,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: contains(500).toString(),
        });
        expect(post.statusCode, post.body).toBe(400);
        expect(issue(post).details?.text).toMatch(/500 filter parameters .*at most 12 per search/);
      });

      it('bounds :contains values, chains, includes and sort keys; a search within the limits works', async () => {
        const cases: [URLSearchParams, RegExp][] = [
          [
            new URLSearchParams({ 'name:contains': Array.from({ length: 11 }, (_, i) => `y${i}`).join(',') }),
            /11 :contains and :text values .*at most 10/,
          ],
          [
            new URLSearchParams(
              Array.from({ length: 4 }, () => [
                'general-practitioner:PractitionerRole.organization.name',
                'x',
              ]),
            ),
            /8 chain links .*at most 6/,
          ],
          [
            new URLSearchParams(Array.from({ length: 11 }, () => ['_include', 'Patient:organization'])),
            /11 _include and _revinclude parameters .*at most 10/,
          ],
          [
            new URLSearchParams({ _sort: 'name,family,given,birthdate,gender,address' }),
            /6 _sort keys .*at most 5/,
          ],
        ];
        for (const [query, text] of cases) {
          const res = await search(query);
          expect(res.statusCode, `${query.toString()}: ${res.body}`).toBe(400);
          expect(issue(res).code).toBe('too-costly');
          expect(issue(res).details?.text).toMatch(text);
        }
        const ok = await search(new URLSearchParams({ 'name:contains': 'e' }));
        expect(ok.statusCode, ok.body).toBe(200);
        expect((ok.json() as { entry?: unknown[] }).entry?.length).toBe(1); // Lee
      });
    });

    describe('point 11: costly $csv FHIRPath', () => {
      it("runs off the event loop: another project's read answers while it runs; it ends in 422 naming the limit", async () => {
        let settled = false;
        const hostile = csv({ _fields: `id,${HOSTILE_FHIRPATH}`, _id: 'none' }).finally(
          () => (settled = true),
        );
        const read = await t.request({
          method: 'GET',
          url: `${t.fhir}/Patient/${bPatient}`,
          token: b.memberToken,
        });
        expect(read.statusCode, read.body).toBe(200);
        expect(settled).toBe(false);
        const res = await hostile;
        expect(res.statusCode, res.body).toBe(422);
        expect(issue(res).code).toBe('too-costly');
        expect(issue(res).details?.text).toMatch(
          new RegExp(`limit of ${FHIRPATH_TIMEOUT} ms \\(fhirpathTimeout\\)`),
        );
        // The pool replaced its stopped worker: FHIRPath beyond the fast path still works.
        const ok = await csv({ _fields: 'name.given.first(),name.family.lower()', _sort: 'family' });
        expect(ok.statusCode, ok.body).toBe(200);
        expect(ok.body).toContain('Ann,lee\r\n');
      });

      it('a CSV export with a costly FHIRPath is refused at kick-off with the same 422', async () => {
        const res = await t.request({
          method: 'GET',
          url: `${t.fhir}/$export?${new URLSearchParams({ _type: 'Patient', _outputFormat: 'text/csv', _fields: HOSTILE_FHIRPATH }).toString()}`,
          token: a.adminToken,
          headers: { prefer: 'respond-async', accept: 'application/fhir+json' },
        });
        expect(res.statusCode, res.body).toBe(422);
        expect(issue(res).code).toBe('too-costly');
      });
    });

    describe('point 12: slow bodies and connections per client', () => {
      let port: number;
      beforeAll(async () => {
        await t.app.listen({ port: 0, host: '127.0.0.1' });
        port = (t.app.server.address() as net.AddressInfo).port;
      });

      it('cuts off a request body sent one byte at a time (408 or close) before it is complete', async () => {
        const raw = await connect(port);
        const length = 200;
        raw.socket.write(
          `POST ${t.fhir}/Patient HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.memberToken}\r\n` +
            `Content-Type: application/fhir+json\r\nContent-Length: ${length}\r\n\r\n`,
        );
        let sent = 0;
        let isClosed = false;
        void raw.closed.then(() => (isClosed = true));
        // One byte every 100 ms: the whole body would take 20 s; the server must give up long before.
        while (sent < length && !isClosed) {
          raw.socket.write(' ');
          sent++;
          await new Promise((r) => setTimeout(r, 100));
        }
        expect(sent).toBeLessThan(length);
        await raw.closed;
        const text = raw.received();
        if (text !== '') {
          expect(text).toMatch(/^HTTP\/1\.1 408 /);
          expect(text).toContain('"code":"timeout"');
        }
      });

      it(`closes a client's connection beyond ${MAX_CONNECTIONS} while the others keep working`, async () => {
        const held = [];
        // Each held connection sends its request at once (a fresh connection that stays silent for requestTimeout is
        // cut, as a slow one must be) and answers: the server has accepted and counted it.
        for (let i = 0; i < MAX_CONNECTIONS; i++) {
          const raw = await connect(port);
          expect(await healthOn(raw)).toMatch(/^HTTP\/1\.1 200 /);
          held.push(raw);
        }
        const extra = await connect(port);
        await extra.closed;
        expect(extra.received()).toBe('');
        for (const raw of held) expect(await healthOn(raw)).toMatch(/^HTTP\/1\.1 200 /);
        // A closed connection frees its place; the server sees the close a moment later.
        const first = held.shift() as Raw;
        first.socket.destroy();
        await first.closed;
        let again: Raw | undefined;
        for (let i = 0; i < 40 && !again; i++) {
          const c = await connect(port).catch(() => undefined);
          if (c && /^HTTP\/1\.1 200 /.test(await healthOn(c))) again = c;
          else await new Promise((r) => setTimeout(r, 50));
        }
        expect(again).toBeDefined();
        for (const raw of [...held, again as Raw]) raw.socket.destroy();
      });
    });
  });
}

describe.runIf(process.env.TEST_DATABASE_URL)('point 11: PostgreSQL statement timeout', () => {
  it('a request statement beyond statementTimeout is cancelled and answers 503 naming the limit', async () => {
    const db = await openPostgres(process.env.TEST_DATABASE_URL as string, {
      max: 1,
      statementTimeoutMs: 200,
    });
    try {
      const err = await db.query('SELECT pg_sleep(5)').then(
        () => undefined,
        (e: unknown) => e,
      );
      const fhirErr = toFhirError(err);
      expect(fhirErr?.status).toBe(503);
      expect(fhirErr?.issueCode).toBe('timeout');
      expect(fhirErr?.message).toMatch(/statementTimeout/);
      // The connection stays usable.
      expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one).toBe(1);
    } finally {
      await db.close();
    }
  });
});
