// The audit writer (API.md §10 "Nothing is lost"): buffered rows are stored in batches; a row the database refuses is
// dropped alone (logged), never holding back the rows batched with it; while the database cannot be reached, rows are
// kept and stored once it answers again.
import { describe, expect, it } from 'vitest';
import type { Queryable } from '../storage/db.js';
import type { AuditRow } from './model.js';
import { createAuditWriter } from './writer.js';

const row = (id: string, content = '{}'): AuditRow => ({
  id,
  projectId: 'p',
  recorded: new Date(0),
  type: 's|c',
  subtype: [],
  action: 'R',
  outcome: '0',
  agents: [],
  entities: [],
  patients: [],
  content,
});

/** A database that stores the ids of each insert, refusing rows whose content is "bad" and failing while `down`. */
function fakeDb() {
  const stored: string[] = [];
  const state = { down: false, calls: 0 };
  const db: Queryable = {
    async query(_sql, params) {
      state.calls++;
      if (state.down) throw Object.assign(new Error('connection refused'), { code: 'ECONNREFUSED' });
      const rows = JSON.parse(String(params?.[0])) as { id: string; content: unknown }[];
      if (rows.some((r) => JSON.stringify(r.content) === '"bad"'))
        throw Object.assign(new Error('unsupported Unicode escape sequence'), { code: '22P05' });
      stored.push(...rows.map((r) => r.id));
      return { rows: [], rowCount: rows.length };
    },
  };
  return { db, stored, state };
}

describe('audit writer', () => {
  it('drops only the row the database refuses, and stores the rest of its batch', async () => {
    const { db, stored } = fakeDb();
    const errors: unknown[] = [];
    const w = createAuditWriter({ db, intervalMs: 60_000, log: { error: (o) => errors.push(o) } });
    w.add(row('a'));
    w.add(row('b', '"bad"'));
    w.add(row('c'));
    await w.flush();
    expect(stored).toEqual(['a', 'c']);
    expect(errors).toEqual([expect.objectContaining({ id: 'b' })]);
    w.add(row('d'));
    await w.close();
    expect(stored).toEqual(['a', 'c', 'd']);
  });

  it('keeps rows while the database is down and stores them when it answers', async () => {
    const { db, stored, state } = fakeDb();
    const w = createAuditWriter({ db, intervalMs: 10, log: { error: () => undefined } });
    state.down = true;
    w.add(row('a'));
    w.add(row('b'));
    await w.flush();
    expect(stored).toEqual([]);
    state.down = false;
    await new Promise((r) => setTimeout(r, 50));
    await w.close();
    expect(stored).toEqual(['a', 'b']);
  });

  it('mirrors each stored row once, as one line', async () => {
    const { db } = fakeDb();
    const lines: string[] = [];
    const w = createAuditWriter({ db, intervalMs: 60_000, mirror: (l) => lines.push(l) });
    w.add(row('a', '{"x":1}'));
    w.stored([row('b', '{"y":2}')]);
    await w.close();
    expect(lines.sort()).toEqual(['{"x":1}', '{"y":2}']);
  });
});
