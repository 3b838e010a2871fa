// Worker thread that owns a PGlite instance and runs the statements the main thread sends, in arrival order.
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite, types } from '@electric-sql/pglite';

export type ThreadRequest =
  | { id: number; op: 'query'; sql: string; params?: unknown[] }
  | { id: number; op: 'exec'; sql: string }
  | { id: number; op: 'close' };

export type ThreadReply =
  { id: number; rows: unknown[]; rowCount: number } | { id: number; error: Record<string, unknown> };

const port = parentPort;
if (!port) throw new Error('pglite-thread runs as a worker thread');

const parsers = {
  [types.INT8]: (v: string) => Number(v),
  [types.NUMERIC]: (v: string) => Number(v),
};
const dir = (workerData as { dir: string | null }).dir;
const db = dir ? await PGlite.create(dir, { parsers }) : await PGlite.create({ parsers });

/** An error as plain fields (message, SQLSTATE code, constraint, detail…), which survive postMessage. */
function plain(err: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = { message: err instanceof Error ? err.message : String(err) };
  for (const [k, v] of Object.entries(err as object))
    if (typeof v === 'string' || typeof v === 'number') out[k] = v;
  return out;
}

port.on('message', (m: ThreadRequest) => {
  const reply = async (): Promise<ThreadReply> => {
    try {
      if (m.op === 'query') {
        const r = await db.query(m.sql, m.params);
        return { id: m.id, rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
      }
      if (m.op === 'exec') await db.exec(m.sql);
      else await db.close();
      return { id: m.id, rows: [], rowCount: 0 };
    } catch (err) {
      return { id: m.id, error: plain(err) };
    }
  };
  void reply().then((r) => port.postMessage(r));
});
port.postMessage('ready');
