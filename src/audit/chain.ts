// Tamper evidence for the audit trail (API.md §10, issue 28 point 5): each project's AuditEvents form a hash chain.
// Sealing gives every stored row, in insertion (`seq`) order, the next place of its project's chain: `chain_no`, the
// previous link's hash (`prev_hash`, 64 zeros for the first link) and `hash` = hex sha256(prev_hash + '\n' + content).
// `audit_chain_heads` keeps each chain's last link. Verification walks a chain and names the first link whose row
// no longer matches. Anchor: retention (retention.ts) deletes only a prefix of each chain and never its last link, so
// the first remaining row's prev_hash is taken as the chain's start; a gap anywhere after it is a deleted row.
// Without a secret, the chain shows changes made by someone who did not recompute every later hash; an operator who
// keeps the `head` of a verification elsewhere can also tell a rewritten chain from the one they saw.
import { createHash } from 'node:crypto';
import type { Db, Queryable } from '../storage/db.js';
import type { AuditChain, ChainVerification } from './model.js';

/** The prev_hash of each chain's first link. */
export const GENESIS_HASH = '0'.repeat(64);
/** The key of the transaction-scoped advisory lock that lets one sealer at a time work (all instances). */
const SEAL_LOCK = 72_410_028;
const SEAL_BATCH = 1000;
const VERIFY_PAGE = 1000;

/** A link's hash: hex sha256 of the previous link's hash, a line feed, and the AuditEvent's stored JSON. */
export function linkHash(prevHash: string, content: string): string {
  return createHash('sha256').update(`${prevHash}\n${content}`, 'utf8').digest('hex');
}

export interface AuditChainOptions {
  /** Rows sealed per transaction (default 1000). */
  sealBatch?: number;
  /** Rows read per query while verifying (default 1000). */
  verifyPage?: number;
}

interface Head {
  chainNo: number;
  hash: string;
}

interface Link {
  id: string;
  chain_no: number | string;
  prev_hash: string;
  hash: string;
  content: string;
}

const isDb = (q: Queryable): q is Db => typeof (q as Partial<Db>).transaction === 'function';

/**
 * Seals one batch inside `tx`: the oldest unsealed rows, each continuing its project's chain. -1 when another sealer
 * holds the lock (it seals these rows), otherwise the number of rows sealed.
 */
async function sealBatch(tx: Queryable, batch: number): Promise<number> {
  const lock = await tx.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1::bigint) AS ok', [
    SEAL_LOCK,
  ]);
  if (!lock.rows[0]?.ok) return -1;
  const rows = await tx.query<{ seq: number | string; project_id: string; content: string }>(
    'SELECT seq, project_id, content FROM audit_events WHERE hash IS NULL ORDER BY seq LIMIT $1',
    [batch],
  );
  if (rows.rows.length === 0) return 0;
  const projects = [...new Set(rows.rows.map((r) => r.project_id))];
  const stored = await tx.query<{ project_id: string; chain_no: number | string; hash: string }>(
    'SELECT project_id, chain_no, hash FROM audit_chain_heads WHERE project_id = ANY($1::text[])',
    [projects],
  );
  const heads = new Map<string, Head>(
    stored.rows.map((h) => [h.project_id, { chainNo: Number(h.chain_no), hash: h.hash }]),
  );
  const headless = projects.filter((p) => !heads.has(p));
  if (headless.length > 0) {
    // A new chain, normally. A chain whose head record was deleted continues from its last remaining link: starting
    // again at 1 would collide with the links kept (audit_events_chain) and stop sealing for every project.
    const ends = await tx.query<{ project_id: string; chain_no: number | string; hash: string }>(
      `SELECT DISTINCT ON (project_id) project_id, chain_no, hash FROM audit_events
       WHERE project_id = ANY($1::text[]) AND chain_no IS NOT NULL ORDER BY project_id, chain_no DESC`,
      [headless],
    );
    for (const e of ends.rows) heads.set(e.project_id, { chainNo: Number(e.chain_no), hash: e.hash });
  }
  const seqs: string[] = [];
  const chainNos: number[] = [];
  const prevs: string[] = [];
  const hashes: string[] = [];
  for (const r of rows.rows) {
    const head = heads.get(r.project_id) ?? { chainNo: 0, hash: GENESIS_HASH };
    const next = { chainNo: head.chainNo + 1, hash: linkHash(head.hash, r.content) };
    seqs.push(String(r.seq));
    chainNos.push(next.chainNo);
    prevs.push(head.hash);
    hashes.push(next.hash);
    heads.set(r.project_id, next);
  }
  await tx.query(
    `UPDATE audit_events a SET chain_no = v.chain_no, prev_hash = v.prev_hash, hash = v.hash
     FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS v(seq, chain_no, prev_hash, hash)
     WHERE a.seq = v.seq`,
    [seqs, chainNos, prevs, hashes],
  );
  const ends = projects.map((p) => heads.get(p) as Head);
  await tx.query(
    `INSERT INTO audit_chain_heads (project_id, chain_no, hash)
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])
     ON CONFLICT (project_id) DO UPDATE SET chain_no = EXCLUDED.chain_no, hash = EXCLUDED.hash`,
    [projects, ends.map((h) => h.chainNo), ends.map((h) => h.hash)],
  );
  return rows.rows.length;
}

/**
 * Seals every unsealed row, a batch per transaction (rows and heads together). Given a transaction instead of a Db,
 * seals within it. Returns the rows sealed; returns early when another sealer (any instance) is at work.
 */
async function seal(q: Queryable, batch: number): Promise<number> {
  let total = 0;
  for (;;) {
    const n = isDb(q) ? await q.transaction((tx) => sealBatch(tx, batch)) : await sealBatch(q, batch);
    if (n < 0) return total;
    total += n;
    if (n < batch) return total;
  }
}

const range = (from: number, to: number): string =>
  from === to ? `link ${from} is` : `links ${from}–${to} are`;

/** Walks one chain from its first remaining row to `head`; undefined when the walk met rows deleted meanwhile. */
async function walk(
  db: Db,
  projectId: string,
  head: Head,
  page: number,
): Promise<ChainVerification | undefined> {
  let checked = 0;
  let prev: { id: string; chainNo: number; hash: string } | undefined;
  const broken = (id: string, chainNo: number, reason: string): ChainVerification => ({
    valid: false,
    checked,
    ...(prev ? { head: prev.hash } : {}),
    broken: { id, chainNo, reason },
  });
  for (;;) {
    const rows = await db.query<Link>(
      `SELECT id, chain_no, prev_hash, hash, content FROM audit_events
       WHERE project_id = $1 AND chain_no > $2 AND chain_no <= $3 ORDER BY chain_no LIMIT $4`,
      [projectId, prev?.chainNo ?? 0, head.chainNo, page],
    );
    for (const row of rows.rows) {
      const chainNo = Number(row.chain_no);
      if (prev && chainNo !== prev.chainNo + 1) {
        // Retention deletes a chain's oldest rows: when the row just checked is gone too, the walk started on rows
        // deleted meanwhile and starts again; otherwise rows were deleted from the middle.
        if (!(await linkExists(db, projectId, prev.chainNo))) return undefined;
        return broken(row.id, chainNo, `${range(prev.chainNo + 1, chainNo - 1)} missing (deleted)`);
      }
      if (prev && row.prev_hash !== prev.hash)
        return broken(row.id, chainNo, `prev_hash does not match link ${prev.chainNo}`);
      if (!prev && chainNo === 1 && row.prev_hash !== GENESIS_HASH)
        return broken(row.id, chainNo, 'the first link does not start from the genesis hash');
      const hash = linkHash(row.prev_hash, row.content);
      if (hash !== row.hash) {
        // The next link (or the head) still names the hash this row's content gives: the stored hash was changed.
        const next = chainNo === head.chainNo ? head.hash : await prevHashOf(db, projectId, chainNo + 1);
        const witness =
          chainNo === head.chainNo ? "the chain's head record" : `the prev_hash of link ${chainNo + 1}`;
        const reason =
          next === hash
            ? `hash was changed: it does not match the content, which ${witness} still confirms`
            : 'content does not match its hash';
        return broken(row.id, chainNo, reason);
      }
      checked++;
      prev = { id: row.id, chainNo, hash: row.hash };
    }
    if (rows.rows.length < page) break;
  }
  if (!prev) {
    // Retention keeps each chain's last link, so a chain with a head has at least one row.
    return broken('', head.chainNo, `every link up to ${head.chainNo} is missing (deleted)`);
  }
  if (prev.chainNo !== head.chainNo)
    return broken(
      prev.id,
      prev.chainNo,
      `${range(prev.chainNo + 1, head.chainNo)} missing (deleted): the chain's head is link ${head.chainNo}`,
    );
  if (prev.hash !== head.hash) return broken(prev.id, prev.chainNo, "hash does not match the chain's head");
  return { valid: true, checked, head: prev.hash };
}

async function linkExists(db: Queryable, projectId: string, chainNo: number): Promise<boolean> {
  const r = await db.query('SELECT 1 FROM audit_events WHERE project_id = $1 AND chain_no = $2', [
    projectId,
    chainNo,
  ]);
  return r.rows.length > 0;
}

async function prevHashOf(db: Queryable, projectId: string, chainNo: number): Promise<string | undefined> {
  const r = await db.query<{ prev_hash: string }>(
    'SELECT prev_hash FROM audit_events WHERE project_id = $1 AND chain_no = $2',
    [projectId, chainNo],
  );
  return r.rows[0]?.prev_hash;
}

async function verify(
  db: Db,
  projectId: string,
  opts: Required<AuditChainOptions>,
): Promise<ChainVerification> {
  await seal(db, opts.sealBatch);
  // The head is read once: links sealed during the walk come after it and are left to the next verification.
  const h = await db.query<{ chain_no: number | string; hash: string }>(
    'SELECT chain_no, hash FROM audit_chain_heads WHERE project_id = $1',
    [projectId],
  );
  const row = h.rows[0];
  if (!row) {
    const any = await db.query<{ id: string; chain_no: number | string }>(
      'SELECT id, chain_no FROM audit_events WHERE project_id = $1 AND chain_no IS NOT NULL ORDER BY chain_no DESC LIMIT 1',
      [projectId],
    );
    const last = any.rows[0];
    if (!last) return { valid: true, checked: 0 };
    return {
      valid: false,
      checked: 0,
      broken: { id: last.id, chainNo: Number(last.chain_no), reason: "the chain's head record is missing" },
    };
  }
  const head = { chainNo: Number(row.chain_no), hash: row.hash };
  // A walk that met retention's deletions starts again (a few times: retention deletes in bounded batches).
  for (let attempt = 0; attempt < 5; attempt++) {
    const result = await walk(db, projectId, head, opts.verifyPage);
    if (result) return result;
  }
  throw new Error(`audit chain of project '${projectId}': rows kept disappearing during verification`);
}

/** The hash chains over `audit_events` of the database `db` (see the file's header for the rules). */
export function createAuditChain(db: Db, options: AuditChainOptions = {}): AuditChain {
  const opts = { sealBatch: options.sealBatch ?? SEAL_BATCH, verifyPage: options.verifyPage ?? VERIFY_PAGE };
  return {
    seal: (q) => seal(q, opts.sealBatch),
    verify: (projectId) => verify(db, projectId, opts),
  };
}
