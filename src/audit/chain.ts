// Tamper evidence for the audit trail (API.md §10, issue 28 point 5): each project's AuditEvents form a hash chain.
// AuditEvent rows (audit_events) are only ever inserted; each insert also puts the row's seq on the sealer's list
// (audit_unsealed). Sealing takes the list in `seq` order and gives every row the next place of its project's chain,
// stored beside it in audit_chain: `chain_no`, the previous link's hash (`prev_hash`, 64 zeros for the first link) and
// `hash` = hex sha256(prev_hash + '\n' + sha256(content)), the content's hash taken when the row was stored and kept on
// the list, so sealing never reads the rows back; the row leaves the list in the same transaction, so each row is on
// the list or in the chain, never both. `audit_chain_heads` keeps each chain's last link. Verification walks a chain's
// links (audit_chain joined to audit_events) and names the first link whose row no longer matches, or whose row is
// gone. Anchor: retention (retention.ts) deletes only a prefix of each chain (links and rows together) and never its
// last link, so the first remaining link's prev_hash is taken as the chain's start; a gap anywhere after it is a
// deleted link.
// Without a secret, the chain shows changes made by someone who did not recompute every later hash; an operator who
// keeps the `head` of a verification elsewhere can also tell a rewritten chain from the one they saw.
import { createHash } from 'node:crypto';
import type { Db, Queryable } from '../storage/db.js';
import { contentHash, type AuditChain, type ChainVerification } from './model.js';

/** The prev_hash of each chain's first link. */
export const GENESIS_HASH = '0'.repeat(64);
/** The key of the transaction-scoped advisory lock that lets one sealer at a time work (all instances). */
const SEAL_LOCK = 72_410_028;
const SEAL_BATCH = 1000;
const VERIFY_PAGE = 1000;

/**
 * A link's hash from the previous link's hash and the hash of the AuditEvent's stored JSON (model.ts contentHash, taken
 * when the row is stored): hex sha256 of the previous hash, a line feed, and the content hash.
 */
export function chainHash(prevHash: string, contentSha256: string): string {
  return createHash('sha256').update(`${prevHash}\n${contentSha256}`, 'utf8').digest('hex');
}

/** A link's hash over the AuditEvent's stored JSON itself (what verification recomputes). */
export function linkHash(prevHash: string, content: string): string {
  return chainHash(prevHash, contentHash(content));
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
  chain_no: number | string;
  prev_hash: string;
  hash: string;
  /** The AuditEvent's id and content; null when its row is gone. */
  id: string | null;
  content: string | null;
}

const isDb = (q: Queryable): q is Db => typeof (q as Partial<Db>).transaction === 'function';

/**
 * Seals one batch inside `tx`: the oldest rows on the sealer's list, each continuing its project's chain. -1 when
 * another sealer holds the lock (it seals these rows), otherwise the seqs taken off the list and the rows sealed.
 */
async function sealBatch(
  tx: Queryable,
  batch: number,
  wait = false,
): Promise<{ taken: number; sealed: number } | undefined> {
  const lock = await tx.query<{ ok: boolean }>(
    wait
      ? 'SELECT true AS ok FROM (SELECT pg_advisory_xact_lock($1::bigint)) AS l'
      : 'SELECT pg_try_advisory_xact_lock($1::bigint) AS ok',
    [SEAL_LOCK],
  );
  if (!lock.rows[0]?.ok) return undefined;
  // A seq already linked cannot happen through the server (a row and its place on the list are inserted in one
  // statement, and leave it when linked): such a seq is only taken off the list, rather than stopping sealing for every
  // project. The list holds each row's project and content hash: the rows themselves are not read back (a listed seq
  // whose row was deleted is linked all the same, and verification names the link whose AuditEvent is missing).
  const listed = await tx.query<{
    seq: number | string;
    project_id: string;
    content_hash: string;
    linked: boolean;
  }>(
    `SELECT u.seq, u.project_id, u.content_hash, EXISTS (SELECT 1 FROM audit_chain c WHERE c.seq = u.seq) AS linked
     FROM audit_unsealed u ORDER BY u.seq LIMIT $1`,
    [batch],
  );
  if (listed.rows.length === 0) return { taken: 0, sealed: 0 };
  const rows = listed.rows.filter((r) => !r.linked);
  const projects = [...new Set(rows.map((r) => r.project_id))];
  const heads = new Map<string, Head>();
  if (projects.length > 0) {
    const stored = await tx.query<{ project_id: string; chain_no: number | string; hash: string }>(
      'SELECT project_id, chain_no, hash FROM audit_chain_heads WHERE project_id = ANY($1::text[])',
      [projects],
    );
    for (const h of stored.rows) heads.set(h.project_id, { chainNo: Number(h.chain_no), hash: h.hash });
  }
  const headless = projects.filter((p) => !heads.has(p));
  if (headless.length > 0) {
    // A new chain, normally. A chain whose head record was deleted continues from its last remaining link: starting
    // again at 1 would collide with the links kept (audit_chain_link) and stop sealing for every project.
    const ends = await tx.query<{ project_id: string; chain_no: number | string; hash: string }>(
      `SELECT DISTINCT ON (project_id) project_id, chain_no, hash FROM audit_chain
       WHERE project_id = ANY($1::text[]) ORDER BY project_id, chain_no DESC`,
      [headless],
    );
    for (const e of ends.rows) heads.set(e.project_id, { chainNo: Number(e.chain_no), hash: e.hash });
  }
  const seqs: string[] = [];
  const projectIds: string[] = [];
  const chainNos: number[] = [];
  const prevs: string[] = [];
  const hashes: string[] = [];
  for (const r of rows) {
    const head = heads.get(r.project_id) ?? { chainNo: 0, hash: GENESIS_HASH };
    const next = { chainNo: head.chainNo + 1, hash: chainHash(head.hash, r.content_hash) };
    seqs.push(String(r.seq));
    projectIds.push(r.project_id);
    chainNos.push(next.chainNo);
    prevs.push(head.hash);
    hashes.push(next.hash);
    heads.set(r.project_id, next);
  }
  if (seqs.length > 0)
    await tx.query(
      `INSERT INTO audit_chain (seq, project_id, chain_no, prev_hash, hash)
       SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[])`,
      [seqs, projectIds, chainNos, prevs, hashes],
    );
  await tx.query('DELETE FROM audit_unsealed WHERE seq = ANY($1::bigint[])', [
    listed.rows.map((r) => String(r.seq)),
  ]);
  if (projects.length > 0) {
    const ends = projects.map((p) => heads.get(p) as Head);
    await tx.query(
      `INSERT INTO audit_chain_heads (project_id, chain_no, hash)
       SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])
       ON CONFLICT (project_id) DO UPDATE SET chain_no = EXCLUDED.chain_no, hash = EXCLUDED.hash`,
      [projects, ends.map((h) => h.chainNo), ends.map((h) => h.hash)],
    );
  }
  return { taken: listed.rows.length, sealed: seqs.length };
}

/**
 * Seals every unsealed row, a batch per transaction (links, the list and heads together). Given a transaction instead
 * of a Db, seals within it. Returns the rows sealed; returns early when another sealer (any instance) is at work.
 */
/**
 * Seals every listed row, a batch per transaction. `wait`: when another sealer (another instance) holds the lock, wait
 * for it rather than leave the work to it — a verification must see every row sealed that was stored before it began.
 */
async function seal(q: Queryable, batch: number, wait = false): Promise<number> {
  let total = 0;
  for (;;) {
    const n = isDb(q)
      ? await q.transaction((tx) => sealBatch(tx, batch, wait))
      : await sealBatch(q, batch, wait);
    if (!n) return total;
    total += n.sealed;
    if (n.taken < batch) return total;
  }
}

const range = (from: number, to: number): string =>
  from === to ? `link ${from} is` : `links ${from}–${to} are`;

/** Walks one chain from its first remaining link to `head`; undefined when the walk met links deleted meanwhile. */
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
      `SELECT c.chain_no, c.prev_hash, c.hash, a.id, a.content
       FROM audit_chain c LEFT JOIN audit_events a ON a.seq = c.seq
       WHERE c.project_id = $1 AND c.chain_no > $2 AND c.chain_no <= $3 ORDER BY c.chain_no LIMIT $4`,
      [projectId, prev?.chainNo ?? 0, head.chainNo, page],
    );
    for (const row of rows.rows) {
      const chainNo = Number(row.chain_no);
      if (prev && chainNo !== prev.chainNo + 1) {
        // Retention deletes a chain's oldest links: when the link just checked is gone too, the walk started on links
        // deleted meanwhile and starts again; otherwise links were deleted from the middle.
        if (!(await linkExists(db, projectId, prev.chainNo))) return undefined;
        return broken(row.id ?? '', chainNo, `${range(prev.chainNo + 1, chainNo - 1)} missing (deleted)`);
      }
      // Retention deletes a link and its row in one statement, which a page (one statement) sees whole or not at all:
      // a link without its row is a row deleted from audit_events alone.
      if (row.id === null || row.content === null)
        return broken('', chainNo, `link ${chainNo}'s AuditEvent is missing (deleted)`);
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
  // Every row is either on the sealer's list or in a link: a row in neither had its link deleted (perhaps one of the
  // oldest, which the walk would take for retention), and its content is no longer covered by any hash.
  const unlinked = await db.query<{ id: string }>(
    `SELECT a.id FROM audit_events a WHERE a.project_id = $1
       AND NOT EXISTS (SELECT 1 FROM audit_chain c WHERE c.seq = a.seq)
       AND NOT EXISTS (SELECT 1 FROM audit_unsealed u WHERE u.seq = a.seq)
     ORDER BY a.seq LIMIT 1`,
    [projectId],
  );
  const orphan = unlinked.rows[0];
  if (orphan) return broken(orphan.id, 0, 'the AuditEvent is in no link of the chain (its link was deleted)');
  return { valid: true, checked, head: prev.hash };
}

async function linkExists(db: Queryable, projectId: string, chainNo: number): Promise<boolean> {
  const r = await db.query('SELECT 1 FROM audit_chain WHERE project_id = $1 AND chain_no = $2', [
    projectId,
    chainNo,
  ]);
  return r.rows.length > 0;
}

async function prevHashOf(db: Queryable, projectId: string, chainNo: number): Promise<string | undefined> {
  const r = await db.query<{ prev_hash: string }>(
    'SELECT prev_hash FROM audit_chain WHERE project_id = $1 AND chain_no = $2',
    [projectId, chainNo],
  );
  return r.rows[0]?.prev_hash;
}

async function verify(
  db: Db,
  projectId: string,
  opts: Required<AuditChainOptions>,
): Promise<ChainVerification> {
  await seal(db, opts.sealBatch, true);
  // The head is read once: links sealed during the walk come after it and are left to the next verification.
  const h = await db.query<{ chain_no: number | string; hash: string }>(
    'SELECT chain_no, hash FROM audit_chain_heads WHERE project_id = $1',
    [projectId],
  );
  const row = h.rows[0];
  if (!row) {
    const any = await db.query<{ id: string | null; chain_no: number | string }>(
      `SELECT a.id, c.chain_no FROM audit_chain c LEFT JOIN audit_events a ON a.seq = c.seq
       WHERE c.project_id = $1 ORDER BY c.chain_no DESC LIMIT 1`,
      [projectId],
    );
    const last = any.rows[0];
    if (!last) return { valid: true, checked: 0 };
    return {
      valid: false,
      checked: 0,
      broken: {
        id: last.id ?? '',
        chainNo: Number(last.chain_no),
        reason: "the chain's head record is missing",
      },
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

/** The hash chains over `audit_events` (links in `audit_chain`) of the database `db` (see the file's header). */
export function createAuditChain(db: Db, options: AuditChainOptions = {}): AuditChain {
  const opts = { sealBatch: options.sealBatch ?? SEAL_BATCH, verifyPage: options.verifyPage ?? VERIFY_PAGE };
  return {
    seal: (q) => seal(q, opts.sealBatch),
    verify: (projectId) => verify(db, projectId, opts),
  };
}
