// Migration 024 on a database written by earlier versions, which stored every version in resource_history, the
// current one included: afterwards the history holds only past versions, and every history answer, vread and count
// is the one the old layout gave (the old history query, run on the old rows, is the reference). New writes then keep
// the history gap-free, concurrent ones included.
import { afterEach, describe, expect, it } from 'vitest';
import type { Db } from '../db.js';
import { migrate, MIGRATIONS } from '../migrate.js';
import { systemContext } from '../../fhir/repository/context.js';
import { history } from '../../fhir/repository/history.js';
import { vreadResource } from '../../fhir/repository/read.js';
import { updateResource } from '../../fhir/repository/update.js';
import { deleteResource } from '../../fhir/repository/delete.js';
import { FhirError } from '../../fhir/outcome.js';
import type { RawJson } from '../../fhir/result.js';
import type { Resource } from '../../fhir/types.js';
import { bareDatabases } from '../../../test/support/db.js';

const databases = bareDatabases(6);

const PROJECT = 'project-a';
const ctx = systemContext(PROJECT, {
  clock: () => new Date(),
  newId: () => crypto.randomUUID(),
  fhirBase: 'http://localhost/fhir/R4',
});

interface OldVersion {
  v: number;
  at: string;
  /** null: a deletion. */
  content: Record<string, unknown> | null;
}

/** The versions the old code wrote for each resource (each in both tables while current). */
const OLD: { type: string; id: string; versions: OldVersion[] }[] = [
  {
    type: 'Patient',
    id: 'updated',
    versions: [
      { v: 1, at: '2024-01-01T00:00:01Z', content: { name: [{ family: 'First' }] } },
      { v: 2, at: '2024-01-01T00:00:05Z', content: { name: [{ family: 'Second' }] } },
    ],
  },
  {
    type: 'Patient',
    id: 'deleted',
    versions: [
      { v: 1, at: '2024-01-01T00:00:02Z', content: { name: [{ family: 'Gone' }] } },
      { v: 2, at: '2024-01-01T00:00:06Z', content: null },
    ],
  },
  {
    type: 'Patient',
    id: 'again',
    versions: [
      { v: 1, at: '2024-01-01T00:00:03Z', content: { name: [{ family: 'Once' }] } },
      { v: 2, at: '2024-01-01T00:00:04Z', content: null },
      { v: 3, at: '2024-01-01T00:00:07Z', content: { name: [{ family: 'Twice' }] } },
    ],
  },
  {
    type: 'Observation',
    id: 'single',
    versions: [{ v: 1, at: '2024-01-01T00:00:04Z', content: { status: 'final', code: { text: 'x' } } }],
  },
];

const resourceOf = (type: string, id: string, o: OldVersion): Record<string, unknown> => ({
  resourceType: type,
  id,
  meta: { versionId: String(o.v), lastUpdated: new Date(o.at).toISOString() },
  ...o.content,
});

/** Writes OLD as the code before migration 024 did: every version in resource_history, the last in resources. */
async function writeOldWay(db: Db): Promise<void> {
  for (const r of OLD) {
    const last = r.versions[r.versions.length - 1] as OldVersion;
    // A deleted row keeps its last content (the id stays reserved).
    const kept = [...r.versions].reverse().find((o) => o.content !== null) as OldVersion;
    const rid = (
      await db.query<{ rid: string }>(
        `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
         VALUES ($1, $2, $3, $4, $5, $6, $7::json) RETURNING rid`,
        [
          r.type,
          r.id,
          PROJECT,
          last.v,
          last.at,
          last.content === null,
          JSON.stringify(resourceOf(r.type, r.id, kept)),
        ],
      )
    ).rows[0]?.rid;
    for (const o of r.versions)
      await db.query(
        `INSERT INTO resource_history (rid, resource_type, id, version_id, project_id, last_updated, deleted, content)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8::json)`,
        [
          rid,
          r.type,
          r.id,
          o.v,
          PROJECT,
          o.at,
          o.content === null,
          o.content === null ? null : JSON.stringify(resourceOf(r.type, r.id, o)),
        ],
      );
  }
}

interface Entry {
  url: string;
  method: string;
  status: string;
  etag: string;
  lastModified: string;
  resource?: unknown;
}

/** A history answer reduced to what a client sees of each entry. */
function entries(body: unknown): { total?: number; entry: Entry[] } {
  const b = JSON.parse((body as RawJson).text) as {
    total?: number;
    entry?: {
      fullUrl: string;
      resource?: unknown;
      request: { method: string };
      response: { status: string; etag: string; lastModified: string };
    }[];
  };
  return {
    ...(b.total !== undefined ? { total: b.total } : {}),
    entry: (b.entry ?? []).map((e) => ({
      url: e.fullUrl,
      method: e.request.method,
      status: e.response.status,
      etag: e.response.etag,
      lastModified: e.response.lastModified,
      ...(e.resource !== undefined ? { resource: e.resource } : {}),
    })),
  };
}

/** Each history answer the tests compare: instance, type and system, whole and paged, with _since and _total. */
async function answers(db: Db): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  const ask = async (
    name: string,
    type: string | undefined,
    id: string | undefined,
    params: Record<string, string>,
  ): Promise<void> => {
    const self = `${ctx.fhirBase}/${[type, id, '_history'].filter(Boolean).join('/')}`;
    const res = await history(db, ctx, type, id, params, self);
    out[name] = entries(res.body);
  };
  for (const r of OLD) await ask(`${r.type}/${r.id}`, r.type, r.id, {});
  await ask('Patient', 'Patient', undefined, {});
  await ask('Patient page 2 of 3', 'Patient', undefined, { _count: '3', _offset: '3', _total: 'accurate' });
  await ask('Patient since', 'Patient', undefined, { _since: '2024-01-01T00:00:03.500Z' });
  await ask('system', undefined, undefined, {});
  await ask('system first 4', undefined, undefined, { _count: '4' });
  await ask('system count', undefined, undefined, { _count: '0' });
  for (const r of OLD)
    for (const o of r.versions) {
      try {
        const res = await vreadResource(db, ctx, r.type, r.id, String(o.v));
        out[`vread ${r.type}/${r.id}/${o.v}`] = JSON.parse((res.body as RawJson).text);
      } catch (err) {
        out[`vread ${r.type}/${r.id}/${o.v}`] = (err as FhirError).code;
      }
    }
  return out;
}

describe.each(databases)('migration 024 on $name', (database) => {
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => cleanup?.());

  const open = async (): Promise<Db> => {
    const { db, drop } = await database.open();
    cleanup = async () => {
      await db.close();
      await drop();
    };
    return db;
  };

  it('drops the history copy of each current version and keeps every history answer', async () => {
    const db = await open();
    await migrate(
      db,
      MIGRATIONS.filter((m) => m.version < 24),
    );
    await writeOldWay(db);
    // The reference: what the old code answered, from the old rows. Its history read resource_history alone, so the
    // same query on those rows, in its order, gives its entries.
    const old = await db.query<{ resource_type: string; id: string; version_id: number }>(
      `SELECT resource_type, id, version_id FROM resource_history ORDER BY last_updated DESC, rid DESC, version_id DESC`,
    );
    expect(old.rows).toHaveLength(8);
    expect(await migrate(db)).toEqual(MIGRATIONS.filter((m) => m.version >= 24).map((m) => m.version));
    const after = await answers(db);

    // Only past versions are left in the history.
    const left = await db.query<{ id: string; version_id: number }>(
      'SELECT id, version_id FROM resource_history ORDER BY id, version_id',
    );
    expect(left.rows).toEqual([
      { id: 'again', version_id: 1 },
      { id: 'again', version_id: 2 },
      { id: 'deleted', version_id: 1 },
      { id: 'updated', version_id: 1 },
    ]);

    // The system's history lists the old rows, in the old order, as the old code rendered them.
    const expected = old.rows.map((r) => {
      const o = OLD.find((x) => x.type === r.resource_type && x.id === r.id)?.versions[
        r.version_id - 1
      ] as OldVersion;
      const url = `${ctx.fhirBase}/${r.resource_type}/${r.id}`;
      return {
        url,
        method: o.content === null ? 'DELETE' : o.v === 1 ? 'POST' : 'PUT',
        status: o.content === null ? '204' : o.v === 1 ? '201' : '200',
        etag: `W/"${o.v}"`,
        lastModified: new Date(o.at).toISOString(),
        ...(o.content !== null ? { resource: resourceOf(r.resource_type, r.id, o) } : {}),
      };
    });
    expect(after.system).toEqual({ total: 8, entry: expected });
    expect(after['system first 4']).toEqual({ entry: expected.slice(0, 4) });
    expect(after['system count']).toEqual({ total: 8, entry: [] });
    const patients = expected.filter((e) => e.url.includes('/Patient/'));
    expect(after.Patient).toEqual({ total: 7, entry: patients });
    expect(after['Patient page 2 of 3']).toEqual({ total: 7, entry: patients.slice(3, 6) });
    expect(after['Patient since']).toEqual({
      total: 4,
      entry: patients.filter((e) => e.lastModified > '2024-01-01T00:00:03.500Z'),
    });
    for (const r of OLD) {
      const mine = expected.filter((e) => e.url.endsWith(`/${r.type}/${r.id}`));
      expect(after[`${r.type}/${r.id}`], `${r.type}/${r.id}`).toEqual({ total: mine.length, entry: mine });
      for (const o of r.versions)
        expect(after[`vread ${r.type}/${r.id}/${o.v}`], `${r.id}/${o.v}`).toEqual(
          o.content === null ? 'rest.vread.gone' : resourceOf(r.type, r.id, o),
        );
    }
  });

  it('keeps the history gap-free across updates, concurrent ones included, and deletions', async () => {
    const db = await open();
    await migrate(
      db,
      MIGRATIONS.filter((m) => m.version < 24),
    );
    await writeOldWay(db);
    await migrate(db);
    const write = (family: string): Promise<unknown> =>
      updateResource(db, ctx, 'Patient', 'updated', {
        resourceType: 'Patient',
        id: 'updated',
        name: [{ family }],
      } as Resource);
    // Ten writers at once (on PostgreSQL each in its own transaction, serialised by the row's lock).
    await Promise.all(Array.from({ length: 10 }, (_, i) => write(`Concurrent${i}`)));
    await deleteResource(db, ctx, 'Patient', 'updated');
    await write('Back');
    const res = entries(
      (
        await history(
          db,
          ctx,
          'Patient',
          'updated',
          { _count: '100' },
          `${ctx.fhirBase}/Patient/updated/_history`,
        )
      ).body,
    );
    expect(res.total).toBe(14);
    expect(res.entry.map((e) => e.etag)).toEqual(Array.from({ length: 14 }, (_, i) => `W/"${14 - i}"`));
    expect(res.entry.map((e) => e.method)).toEqual(['PUT', 'DELETE', ...Array(11).fill('PUT'), 'POST']);
    // Each version is stored once: the past ones in resource_history, the current one in resources.
    const stored = await db.query<{ past: number[]; current: number }>(
      `SELECT (SELECT array_agg(h.version_id ORDER BY h.version_id) FROM resource_history h WHERE h.rid = r.rid) AS past,
              r.version_id AS current
       FROM resources r WHERE resource_type = 'Patient' AND id = 'updated'`,
    );
    expect(stored.rows[0]).toEqual({ past: Array.from({ length: 13 }, (_, i) => i + 1), current: 14 });
    // The deletion (version 13) keeps no content; the version it deleted (12) keeps its own.
    const deleted = await db.query<{ version_id: number; deleted: boolean; content: unknown }>(
      `SELECT version_id, deleted, content FROM resource_history h
       WHERE rid = (SELECT rid FROM resources WHERE resource_type = 'Patient' AND id = 'updated') AND version_id >= 12
       ORDER BY version_id`,
    );
    expect(deleted.rows.map((r) => [r.version_id, r.deleted, r.content === null])).toEqual([
      [12, false, false],
      [13, true, true],
    ]);
    await expect(vreadResource(db, ctx, 'Patient', 'updated', '13')).rejects.toMatchObject({
      code: 'rest.vread.gone',
    });
    const v12 = await vreadResource(db, ctx, 'Patient', 'updated', '12');
    expect((JSON.parse((v12.body as RawJson).text) as { name: unknown }).name).toEqual([
      { family: expect.stringMatching(/^Concurrent\d$/) as unknown },
    ]);
  });
});
