// Every official HL7 R4 example (hl7.fhir.r4.examples@4.0.1, CC0) is accepted by update (PUT with its own id; an
// AuditEvent, which is never updated, by create) and reads back equal apart from meta (and an AuditEvent's id). Examples that break the R4 rules themselves are listed with a reason. The
// examples that are the R4 base definitions themselves (a shared conformance resource's type and id) are refused
// with 403, as every write to a shared resource (API.md §9).
// The examples are split into shards, one test file each, so that the test runner's workers share them.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isConformanceType } from '../../src/fhir/conformance/model.js';
import { createSharedSet } from '../../src/fhir/conformance/shared-set.js';
import { isResourceType } from '../../src/fhir/definitions/index.js';
import { testDatabases } from './db.js';
import { startTestApp, type TestApp } from './app.js';
import { KNOWN_BAD_EXAMPLES } from './known-invalid-examples.js';

const dir = path.resolve('node_modules/hl7.fhir.r4.examples');

function loadExamples(): { file: string; resource: Record<string, unknown> }[] {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.json') && f !== 'package.json' && !f.startsWith('.'))
    .sort()
    .map((file) => ({
      file,
      resource: JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')) as Record<string, unknown>,
    }))
    .filter(
      (x) =>
        typeof x.resource.resourceType === 'string' &&
        typeof x.resource.id === 'string' &&
        isResourceType(x.resource.resourceType),
    );
}

function withoutMeta(r: Record<string, unknown>): Record<string, unknown> {
  const { meta: _meta, ...rest } = r;
  return rest;
}

async function pool<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    }),
  );
}

/** Tests shard `shard` (0-based) of `shards` of the examples. */
export function describeExamples(shard: number, shards: number): void {
  // One database: PostgreSQL where the run has one, else the embedded one. Both are the same PostgreSQL engine
  // behind the same query layer, and this round trip is the suite's longest test: twice would add minutes.
  describe.each(testDatabases().slice(-1))(
    `HL7 R4 examples (part ${shard + 1} of ${shards}) on $name`,
    (database) => {
      let t: TestApp;
      const all = loadExamples();
      const examples = all.filter((_, i) => i % shards === shard);
      const known = new Set(examples.map((x) => x.file));
      const shared = createSharedSet({ packages: [] });
      const isShared = (r: Record<string, unknown>): boolean => {
        const type = r.resourceType as string;
        return isConformanceType(type) && shared.entryById(type, r.id as string) !== undefined;
      };
      beforeAll(async () => {
        t = await startTestApp(database);
      });
      afterAll(async () => t?.close());

      it(`stores and reads back all ${examples.length} examples`, async () => {
        expect(examples.length).toBeGreaterThan(2000 / shards);
        const files = new Set(all.map((x) => x.file));
        expect(Object.keys(KNOWN_BAD_EXAMPLES).filter((f) => !files.has(f))).toEqual([]);
        const rejected: string[] = [];
        const mismatched: string[] = [];
        const refusedShared: string[] = [];
        // Examples share ids across files only for different types; PUT keeps the example's own id.
        await pool(examples, 8, async ({ file, resource }) => {
          // AuditEvents are never updated (API.md §10): they are created (the server gives the id), and read back.
          const audit = resource.resourceType === 'AuditEvent';
          const put = await t.request({
            method: audit ? 'POST' : 'PUT',
            url: `${t.fhir}/${resource.resourceType as string}${audit ? '' : `/${resource.id as string}`}`,
            token: t.adminToken,
            payload: resource,
          });
          const id =
            audit && put.statusCode === 201 ? (put.json() as { id: string }).id : (resource.id as string);
          const url = `${t.fhir}/${resource.resourceType as string}/${id}`;
          if (isShared(resource)) {
            if (put.statusCode === 403 && put.body.includes('"forbidden"')) refusedShared.push(file);
            else rejected.push(file);
            return;
          }
          if (put.statusCode !== 201 && put.statusCode !== 200) {
            rejected.push(file);
            if (!KNOWN_BAD_EXAMPLES[file]) console.log(file, put.statusCode, put.body.slice(0, 400));
            return;
          }
          // FHIR JSON asked for: a Binary read otherwise answers its raw content.
          const accept = { accept: 'application/fhir+json' };
          const read = await t.request({ method: 'GET', url, token: t.adminToken, headers: accept });
          const back = read.json() as Record<string, unknown>;
          // A Binary gets the server-owned `url` of its own content (Medplum's Binary.url), and its content comes back
          // as canonical base64: the same bytes, without the whitespace an example may wrap its `data` with.
          const sent: Record<string, unknown> =
            resource.resourceType === 'Binary' && typeof resource.data === 'string'
              ? { ...resource, data: resource.data.replace(/\s+/g, '') }
              : { ...resource, id };
          if (back.resourceType === 'Binary') delete back.url;
          // A Subscription's `status` is the server's (API.md §8: active at once, or requested until a handshake) and its
          // `channel.header` values are write-only.
          if (back.resourceType === 'Subscription') {
            const { header: _header, ...channel } = (resource.channel ?? {}) as Record<string, unknown>;
            Object.assign(sent, { ...sent, channel, status: back.status });
          }
          try {
            expect(withoutMeta(back)).toEqual(withoutMeta(sent));
          } catch {
            mismatched.push(file);
          }
        });
        expect(mismatched).toEqual([]);
        expect(refusedShared.length).toBe(examples.filter((x) => isShared(x.resource)).length);
        expect(refusedShared.length).toBeGreaterThan(100);
        expect(rejected.sort()).toEqual(
          Object.keys(KNOWN_BAD_EXAMPLES)
            .filter((f) => known.has(f))
            .sort(),
        );
      }, 600_000);
    },
  );
}
