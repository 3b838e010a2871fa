// The audit trail's tamper evidence and retention (issue 28 points 2 and 5): sealing (src/audit/chain.ts), retention
// (src/audit/retention.ts) and AuditEvent/$verify-chain. Rows are inserted with SQL, as the recorder would store them;
// tampering is SQL on audit_events (the rows) and audit_chain (their links).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuditChain, GENESIS_HASH, linkHash } from '../../src/audit/chain.js';
import { createAuditMaintenance, deleteAuditBatch } from '../../src/audit/retention.js';
import type { Db } from '../../src/storage/db.js';
import { testDatabases } from '../support/db.js';
import { scopedClientToken, startTestApp, type TestApp } from '../support/app.js';
import { deleteSealed, insertEvent, insertMany } from '../support/audit-rows.js';

const DAY = 86_400_000;

interface Sealed {
  seq: string;
  id: string;
  chain_no: number;
  prev_hash: string;
  hash: string;
  content: string;
}

/** A project's AuditEvent rows in chain order with their links; unsealed rows last, their link fields null. */
async function chainOf(db: Db, projectId: string): Promise<Sealed[]> {
  const r = await db.query<Sealed>(
    `SELECT a.seq::text AS seq, a.id, c.chain_no, c.prev_hash, c.hash, a.content
     FROM audit_events a LEFT JOIN audit_chain c ON c.seq = a.seq
     WHERE a.project_id = $1 ORDER BY c.chain_no NULLS LAST, a.seq`,
    [projectId],
  );
  return r.rows.map((row) => ({ ...row, chain_no: Number(row.chain_no) }));
}

const count = async (db: Db, sql: string, params: unknown[] = []): Promise<number> =>
  (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, params)).rows[0]!.n;

describe.each(testDatabases())('audit hash chain on $name', (database) => {
  let db: Db;
  beforeAll(async () => {
    db = await database.open();
  });
  afterAll(async () => db?.close());

  it('seals rows into contiguous per-project chains whose hashes verify', async () => {
    const chain = createAuditChain(db, { sealBatch: 7, verifyPage: 5 });
    const [a, b] = [randomUUID(), randomUUID()];
    for (let i = 0; i < 12; i++) {
      await insertEvent(db, a);
      if (i % 2 === 0) await insertEvent(db, b);
    }
    await insertEvent(db, '');
    expect(await chain.seal(db)).toBe(19);
    expect(await chain.seal(db)).toBe(0);
    // Sealing only inserts links and empties the list: the rows are as inserted.
    expect(await count(db, 'audit_unsealed')).toBe(0);
    for (const [p, n] of [
      [a, 12],
      [b, 6],
      ['', 1],
    ] as const) {
      const rows = await chainOf(db, p);
      expect(rows.map((r) => r.chain_no)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
      expect(rows[0]!.prev_hash).toBe(GENESIS_HASH);
      rows.forEach((r, i) => {
        expect(r.hash).toBe(linkHash(r.prev_hash, r.content));
        if (i > 0) expect(r.prev_hash).toBe(rows[i - 1]!.hash);
      });
      const v = await chain.verify(p);
      expect(v).toEqual({ valid: true, checked: n, head: rows[n - 1]!.hash });
    }
    // Later rows continue the chain from its head.
    await insertMany(db, a, 3);
    const v = await chain.verify(a);
    expect(v.valid).toBe(true);
    expect(v.checked).toBe(15);
    const heads = await db.query<{ chain_no: number | string }>(
      'SELECT chain_no FROM audit_chain_heads WHERE project_id = $1',
      [a],
    );
    expect(Number(heads.rows[0]!.chain_no)).toBe(15);
    expect(await chain.verify(randomUUID())).toEqual({ valid: true, checked: 0 });
  });

  it('concurrent sealers never fork a chain', async () => {
    const p = randomUUID();
    const chains = [createAuditChain(db, { sealBatch: 3 }), createAuditChain(db, { sealBatch: 4 })];
    for (let round = 0; round < 5; round++) {
      await Promise.all([insertMany(db, p, 10), chains[0]!.seal(db), chains[1]!.seal(db)]);
      await Promise.all([chains[0]!.seal(db), chains[1]!.seal(db), chains[0]!.seal(db)]);
    }
    await chains[0]!.seal(db);
    const rows = await chainOf(db, p);
    expect(rows.length).toBe(50);
    expect(rows.map((r) => r.chain_no)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect((await chains[1]!.verify(p)).valid).toBe(true);
  });

  it('a listed seq already linked is only taken off the list', async () => {
    const chain = createAuditChain(db, { sealBatch: 2 });
    const p = randomUUID();
    await insertMany(db, p, 2);
    await chain.seal(db);
    const [first] = await chainOf(db, p);
    await db.query("INSERT INTO audit_unsealed (seq, project_id, content_hash) VALUES ($1, $2, 'x')", [
      first!.seq,
      p,
    ]);
    await insertMany(db, p, 3);
    expect(await chain.seal(db)).toBe(3);
    expect(await count(db, 'audit_unsealed')).toBe(0);
    expect((await chainOf(db, p)).map((r) => r.chain_no)).toEqual([1, 2, 3, 4, 5]);
    expect(await chain.verify(p)).toMatchObject({ valid: true, checked: 5 });
  });

  it('names the first broken link: changed content, hash or prev_hash, rows or links deleted (middle, tail)', async () => {
    const chain = createAuditChain(db, { verifyPage: 4 });
    const fresh = async (n: number): Promise<{ p: string; rows: Sealed[] }> => {
      const p = randomUUID();
      await insertMany(db, p, n);
      await chain.seal(db);
      return { p, rows: await chainOf(db, p) };
    };

    const c = await fresh(10);
    await db.query('UPDATE audit_events SET content = replace(content, $2, $3) WHERE id = $1', [
      c.rows[5]!.id,
      '"outcome":"0"',
      '"outcome":"4"',
    ]);
    expect(await chain.verify(c.p)).toEqual({
      valid: false,
      checked: 5,
      head: c.rows[4]!.hash,
      broken: { id: c.rows[5]!.id, chainNo: 6, reason: 'content does not match its hash' },
    });

    const h = await fresh(10);
    await db.query('UPDATE audit_chain SET hash = $2 WHERE seq = $1', [h.rows[2]!.seq, 'f'.repeat(64)]);
    const vh = await chain.verify(h.p);
    expect(vh.valid).toBe(false);
    expect(vh.broken).toMatchObject({ id: h.rows[2]!.id, chainNo: 3 });
    expect(vh.broken!.reason).toMatch(/^hash was changed/);

    const ph = await fresh(6);
    await db.query('UPDATE audit_chain SET prev_hash = $2 WHERE seq = $1', [ph.rows[4]!.seq, 'a'.repeat(64)]);
    expect((await chain.verify(ph.p)).broken).toEqual({
      id: ph.rows[4]!.id,
      chainNo: 5,
      reason: 'prev_hash does not match link 4',
    });

    // A row deleted from audit_events alone: its link remains and names it.
    const e = await fresh(10);
    await db.query('DELETE FROM audit_events WHERE id = ANY($1)', [[e.rows[6]!.id, e.rows[7]!.id]]);
    expect(await chain.verify(e.p)).toEqual({
      valid: false,
      checked: 6,
      head: e.rows[5]!.hash,
      broken: { id: '', chainNo: 7, reason: "link 7's AuditEvent is missing (deleted)" },
    });
    // Links deleted (with or without their rows): a gap.
    const m = await fresh(10);
    await deleteSealed(db, [m.rows[6]!.id, m.rows[7]!.id]);
    expect(await chain.verify(m.p)).toMatchObject({
      valid: false,
      checked: 6,
      broken: { id: m.rows[8]!.id, chainNo: 9, reason: 'links 7–8 are missing (deleted)' },
    });
    const m1 = await fresh(5);
    await db.query('DELETE FROM audit_chain WHERE seq = $1', [m1.rows[1]!.seq]);
    expect((await chain.verify(m1.p)).broken).toEqual({
      id: m1.rows[2]!.id,
      chainNo: 3,
      reason: 'link 2 is missing (deleted)',
    });

    const t = await fresh(10);
    await deleteSealed(
      db,
      t.rows.slice(7).map((r) => r.id),
    );
    expect(await chain.verify(t.p)).toMatchObject({
      valid: false,
      checked: 7,
      broken: {
        id: t.rows[6]!.id,
        chainNo: 7,
        reason: "links 8–10 are missing (deleted): the chain's head is link 10",
      },
    });

    const te = await fresh(4);
    await db.query('DELETE FROM audit_events WHERE id = $1', [te.rows[3]!.id]);
    expect((await chain.verify(te.p)).broken).toEqual({
      id: '',
      chainNo: 4,
      reason: "link 4's AuditEvent is missing (deleted)",
    });

    const all = await fresh(3);
    await db.query('DELETE FROM audit_events WHERE project_id = $1', [all.p]);
    expect(await chain.verify(all.p)).toEqual({
      valid: false,
      checked: 0,
      broken: { id: '', chainNo: 1, reason: "link 1's AuditEvent is missing (deleted)" },
    });
    const all2 = await fresh(3);
    await deleteSealed(
      db,
      all2.rows.map((r) => r.id),
    );
    expect((await chain.verify(all2.p)).broken).toEqual({
      id: '',
      chainNo: 3,
      reason: 'every link up to 3 is missing (deleted)',
    });

    // Deleting the oldest rows (as retention does) leaves a chain that still verifies from its new first row.
    const o = await fresh(8);
    await deleteSealed(
      db,
      o.rows.slice(0, 3).map((r) => r.id),
    );
    expect(await chain.verify(o.p)).toEqual({ valid: true, checked: 5, head: o.rows[7]!.hash });
  });

  it('a deleted head record is reported, and sealing goes on from the last remaining link', async () => {
    const chain = createAuditChain(db);
    const p = randomUUID();
    await insertMany(db, p, 3);
    await chain.seal(db);
    const rows = await chainOf(db, p);
    await db.query('DELETE FROM audit_chain_heads WHERE project_id = $1', [p]);
    expect(await chain.verify(p)).toEqual({
      valid: false,
      checked: 0,
      broken: { id: rows[2]!.id, chainNo: 3, reason: "the chain's head record is missing" },
    });
    // Other projects' rows sealed in the same batch are not held up.
    const other = randomUUID();
    await insertEvent(db, other);
    await insertMany(db, p, 2);
    expect(await chain.seal(db)).toBe(3);
    expect((await chainOf(db, p)).map((r) => r.chain_no)).toEqual([1, 2, 3, 4, 5]);
    expect(await chain.verify(p)).toMatchObject({ valid: true, checked: 5 });
    expect(await chain.verify(other)).toMatchObject({ valid: true, checked: 1 });
  });

  it('a verification that meets retention deleting the oldest links starts again from the new first link', async () => {
    const p = randomUUID();
    await insertMany(db, p, 8);
    await createAuditChain(db).seal(db);
    const rows = await chainOf(db, p);
    let pages = 0;
    // Retention runs between the walk's first and second page.
    const racing: Db = {
      ...db,
      query: async (sql, params, opts) => {
        if (sql.includes('chain_no > $2') && ++pages === 2)
          await deleteSealed(
            db,
            rows.slice(0, 3).map((r) => r.id),
          );
        return db.query(sql, params, opts);
      },
    };
    expect(await createAuditChain(racing, { verifyPage: 2 }).verify(p)).toEqual({
      valid: true,
      checked: 5,
      head: rows[7]!.hash,
    });
    expect(pages).toBeGreaterThan(4);
  });

  it('retention deletes only old sealed rows, never a chain head, and chains still verify', async () => {
    // A database of its own: the other tests' chains would be trimmed too.
    const rdb = await database.open();
    try {
      const now = new Date();
      const clock = () => now;
      const chain = createAuditChain(rdb);
      const p = randomUUID();
      const q = randomUUID();
      await insertMany(rdb, p, 6, new Date(now.getTime() - 3 * DAY));
      const newP = await insertMany(rdb, p, 4, new Date(now.getTime() - DAY / 2));
      // Project q's rows are all old: its last link is kept as the end a verification must reach.
      const oldQ = await insertMany(rdb, q, 3, new Date(now.getTime() - 3 * DAY));
      const maintenance = createAuditMaintenance({
        db: rdb,
        clock,
        retentionSeconds: 86_400,
        chain,
        batchSize: 4,
      });
      expect(await maintenance.sweepOnce()).toEqual({ sealed: 13, deleted: 8 });
      expect((await chainOf(rdb, p)).map((x) => x.id)).toEqual(newP);
      expect((await chainOf(rdb, q)).map((x) => x.id)).toEqual([oldQ[2]]);
      expect(await chain.verify(p)).toMatchObject({ valid: true, checked: 4 });
      expect(await chain.verify(q)).toMatchObject({ valid: true, checked: 1 });

      // An old row not yet sealed is never deleted (it would vanish from the chain unseen).
      const late = await insertEvent(rdb, p, new Date(now.getTime() - 3 * DAY));
      expect(await deleteAuditBatch(rdb, new Date(now.getTime() + DAY), 100)).toBe(3);
      expect((await chainOf(rdb, p)).map((x) => x.id)).toEqual([newP[3], late]);
      // Sealed after the newer rows, it waits for them: a chain loses only a prefix.
      const p2 = randomUUID();
      await insertMany(rdb, p2, 2, new Date(now.getTime() - DAY / 2));
      const late2 = await insertEvent(rdb, p2, new Date(now.getTime() - 3 * DAY));
      await insertEvent(rdb, p2, new Date(now.getTime() - DAY / 2));
      expect(await maintenance.sweepOnce()).toEqual({ sealed: 5, deleted: 0 });
      expect((await chainOf(rdb, p2)).map((x) => x.id)).toContain(late2);
      expect(await chain.verify(p2)).toMatchObject({ valid: true, checked: 4 });

      // Retention 0 keeps everything.
      const later = () => new Date(now.getTime() + 10 * DAY);
      const keep = createAuditMaintenance({ db: rdb, clock: later, retentionSeconds: 0, chain });
      expect((await keep.sweepOnce()).deleted).toBe(0);
      // Much later, everything but the heads goes, and every chain still verifies.
      const sweeper = createAuditMaintenance({
        db: rdb,
        clock: later,
        retentionSeconds: 86_400,
        chain,
        batchSize: 2,
      });
      expect((await sweeper.sweepOnce()).deleted).toBe(4);
      for (const project of [p, q, p2]) {
        expect((await chainOf(rdb, project)).length).toBe(1);
        expect(await chain.verify(project)).toMatchObject({ valid: true, checked: 1 });
      }
      // Links and rows went together.
      expect(
        await count(rdb, 'audit_chain c WHERE NOT EXISTS (SELECT 1 FROM audit_events a WHERE a.seq = c.seq)'),
      ).toBe(0);
      expect(
        await count(rdb, 'audit_events a WHERE NOT EXISTS (SELECT 1 FROM audit_chain c WHERE c.seq = a.seq)'),
      ).toBe(0);
    } finally {
      await rdb.close();
    }
  });

  it('retention: a link whose row was deleted alone holds nothing up, and goes with the links around it', async () => {
    const rdb = await database.open();
    try {
      const now = new Date();
      const chain = createAuditChain(rdb);
      const p = randomUUID();
      const old = await insertMany(rdb, p, 5, new Date(now.getTime() - 3 * DAY));
      const recent = await insertMany(rdb, p, 2, new Date(now.getTime() - DAY / 2));
      await chain.seal(rdb);
      await rdb.query('DELETE FROM audit_events WHERE id = ANY($1)', [[old[0], old[2]]]);
      expect((await chain.verify(p)).broken?.reason).toBe("link 1's AuditEvent is missing (deleted)");
      expect(await deleteAuditBatch(rdb, new Date(now.getTime() - DAY), 100)).toBe(5);
      expect(await count(rdb, 'audit_chain')).toBe(2);
      expect((await chainOf(rdb, p)).map((x) => x.id)).toEqual(recent);
      expect(await chain.verify(p)).toMatchObject({ valid: true, checked: 2 });
    } finally {
      await rdb.close();
    }
  });

  it('start() seals in the background and stop() waits for it', async () => {
    const chain = createAuditChain(db);
    const p = randomUUID();
    await insertMany(db, p, 3);
    const m = createAuditMaintenance({
      db,
      clock: () => new Date(),
      retentionSeconds: 0,
      chain,
      intervalMs: 20,
    });
    m.start();
    for (let i = 0; i < 100 && (await chainOf(db, p)).some((r) => r.hash === null); i++)
      await new Promise((r) => setTimeout(r, 20));
    await m.stop();
    expect((await chainOf(db, p)).every((r) => r.hash !== null)).toBe(true);
  });
});

describe.each(testDatabases())('AuditEvent/$verify-chain on $name', (database) => {
  let t: TestApp;
  let projectId = '';
  let adminToken = '';
  let memberToken = '';
  let other: { projectId: string; adminToken: string };
  const verify = (token: string, query = '') =>
    t.request({ method: 'GET', url: `${t.fhir}/AuditEvent/$verify-chain${query}`, token });
  const param = (body: { parameter: { name: string }[] }, name: string) =>
    body.parameter.find((x) => x.name === name) as Record<string, unknown> | undefined;

  beforeAll(async () => {
    t = await startTestApp(database);
    ({ projectId, adminToken, memberToken } = await t.newProject());
    other = await t.newProject();
  });
  afterAll(async () => t?.close());

  it('answers a project admin: valid, then after tampering the broken AuditEvent', async () => {
    const ids = await insertMany(t.db, projectId, 5);
    const res = await verify(adminToken);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.resourceType).toBe('Parameters');
    expect(param(body, 'valid')).toEqual({ name: 'valid', valueBoolean: true });
    expect(param(body, 'checked')?.valueInteger).toBeGreaterThanOrEqual(5);
    expect(param(body, 'head')?.valueString).toMatch(/^[0-9a-f]{64}$/);
    expect(param(body, 'brokenAt')).toBeUndefined();

    // The same by POST with a Parameters body naming the project.
    const post = await t.request({
      method: 'POST',
      url: `${t.fhir}/AuditEvent/$verify-chain`,
      token: adminToken,
      payload: { resourceType: 'Parameters', parameter: [{ name: 'project', valueString: projectId }] },
    });
    expect(post.statusCode, post.body).toBe(200);
    expect(param(post.json(), 'valid')?.valueBoolean).toBe(true);

    await t.db.query(
      `UPDATE audit_events SET content = replace(content, '"action":"R"', '"action":"D"') WHERE id = $1`,
      [ids[2]],
    );
    const broken = (await verify(adminToken)).json();
    expect(param(broken, 'valid')?.valueBoolean).toBe(false);
    expect(param(broken, 'brokenAt')?.valueReference).toEqual({ reference: `AuditEvent/${ids[2]}` });
    expect(typeof param(broken, 'chainNo')?.valueInteger).toBe('number');
    expect(param(broken, 'reason')?.valueString).toBe('content does not match its hash');
  });

  it('refuses members, other projects’ admins, and malformed parameters', async () => {
    const member = await verify(memberToken);
    expect(member.statusCode).toBe(403);
    expect(member.json().issue[0].code).toBe('forbidden');
    const cross = await verify(other.adminToken, `?project=${projectId}`);
    expect(cross.statusCode).toBe(403);
    expect(cross.json().resourceType).toBe('OperationOutcome');
    const none = await verify(other.adminToken, '?project=_none');
    expect(none.statusCode).toBe(403);
    for (const q of [
      '?project=a%20b',
      '?project=',
      `?project=${'x'.repeat(65)}`,
      `?project=${projectId}&project=${projectId}`,
    ]) {
      const bad = await verify(adminToken, q);
      expect(bad.statusCode, q).toBe(400);
      expect(bad.json().issue[0].code).toBe('invalid');
    }
    const badBody = await t.request({
      method: 'POST',
      url: `${t.fhir}/AuditEvent/$verify-chain`,
      token: adminToken,
      payload: { resourceType: 'Parameters', parameter: [{ name: 'project', valueInteger: 3 }] },
    });
    expect(badBody.statusCode).toBe(400);
  });

  it('a token scoped without AuditEvent read is refused', async () => {
    const scoped = await scopedClientToken(t, adminToken, projectId, 'system/Patient.rs', { admin: true });
    expect((await verify(scoped)).statusCode).toBe(403);
    const reader = await scopedClientToken(t, adminToken, projectId, 'system/AuditEvent.rs', { admin: true });
    expect((await verify(reader)).statusCode).toBe(200);
  });

  it('a super administrator verifies any project, and the chain of requests without a login', async () => {
    await insertMany(t.db, other.projectId, 2);
    const res = await verify(t.adminToken, `?project=${other.projectId}`);
    expect(res.statusCode, res.body).toBe(200);
    expect(param(res.json(), 'valid')?.valueBoolean).toBe(true);
    expect(param(res.json(), 'checked')?.valueInteger).toBeGreaterThanOrEqual(2);
    await insertEvent(t.db, '');
    const anon = await verify(t.adminToken, '?project=_none');
    expect(anon.statusCode, anon.body).toBe(200);
    expect(param(anon.json(), 'valid')?.valueBoolean).toBe(true);
    const tampered = await verify(t.adminToken, `?project=${projectId}`);
    expect(param(tampered.json(), 'valid')?.valueBoolean).toBe(false);
  });
});
