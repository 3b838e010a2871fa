// The log's destination (log-lines.ts): one write per turn of the event loop, whole lines, in order, and nothing lost
// when the process exits.
import { spawnSync } from 'node:child_process';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { turnBatchedLines } from './log-lines.js';

function manual() {
  const writes: string[] = [];
  const turns: (() => void)[] = [];
  const lines = turnBatchedLines({ write: (t) => writes.push(t) }, { atTurnEnd: (fn) => turns.push(fn) });
  const endTurn = (): void => {
    for (const fn of turns.splice(0)) fn();
  };
  return { writes, lines, endTurn, turns };
}

describe('turnBatchedLines', () => {
  it("writes the lines of one turn once, at the turn's end, whole and in order", () => {
    const { writes, lines, endTurn, turns } = manual();
    const log = pino({ base: null, timestamp: false }, lines);
    log.info('one');
    log.warn({ n: 2 }, 'two');
    log.error('three');
    expect(writes).toEqual([]);
    expect(turns).toHaveLength(1);
    endTurn();
    expect(writes).toHaveLength(1);
    const parsed = (writes[0] as string)
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { msg: string });
    expect(parsed.map((l) => l.msg)).toEqual(['one', 'two', 'three']);
    // The next turn's lines go in the next write.
    log.info('four');
    endTurn();
    expect(writes).toHaveLength(2);
    expect(writes[1]).toContain('"msg":"four"');
  });

  it('writes at once when the pending text reaches maxPending', () => {
    const writes: string[] = [];
    const lines = turnBatchedLines({ write: (t) => writes.push(t) }, { maxPending: 10, atTurnEnd: () => {} });
    lines.write('12345\n');
    expect(writes).toEqual([]);
    lines.write('67890\n');
    expect(writes).toEqual(['12345\n67890\n']);
  });

  it('flush and flushSync write what is pending; nothing when nothing is', () => {
    const { writes, lines, endTurn } = manual();
    lines.write('a\n');
    lines.flushSync();
    expect(writes).toEqual(['a\n']);
    let called = false;
    lines.write('b\n');
    lines.flush(() => (called = true));
    expect(called).toBe(true);
    expect(writes).toEqual(['a\n', 'b\n']);
    endTurn();
    lines.flushSync();
    expect(writes).toEqual(['a\n', 'b\n']);
  });

  it('the lines logged just before process.exit reach standard output', () => {
    // As main.ts wires it: the fatal line of an uncaught exception is logged, then the process exits at once.
    const script = `
      import { pino } from 'pino';
      import { turnBatchedLines } from './src/log-lines.ts';
      const lines = turnBatchedLines(pino.destination({ dest: 1, sync: true }));
      process.on('exit', () => lines.flushSync());
      const log = pino({ base: null }, lines);
      for (let i = 0; i < 1000; i++) log.info({ i }, 'line');
      log.fatal('last words');
      process.exit(3);
    `;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status).toBe(3);
    const out = r.stdout.split('\n').filter(Boolean);
    expect(out).toHaveLength(1001);
    expect(out.map((l) => (JSON.parse(l) as { i?: number }).i).slice(0, 1000)).toEqual(
      Array.from({ length: 1000 }, (_, i) => i),
    );
    expect(JSON.parse(out[1000] as string)).toMatchObject({ level: 60, msg: 'last words' });
  });
});
