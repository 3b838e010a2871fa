// The websocket hub (socket-hub.ts) with fake sockets and in-process signals: order per subscription, binds racing
// announcements, render failures, slow readers, revocation and close.
import { describe, expect, it } from 'vitest';
import { localSignals } from '../../storage/signals.js';
import { createSocketHub, SOCKETS_CHANNEL, type HubSocket, type SocketHubDeps } from './socket-hub.js';

interface FakeSocket extends HubSocket {
  sent: string[];
  closedWith?: [number, string];
  buffered: number;
}

function fakeSocket(): FakeSocket {
  const s: FakeSocket = {
    sent: [],
    buffered: 0,
    send(text) {
      s.sent.push(text);
    },
    close(code, reason) {
      s.closedWith = [code, reason];
    },
    bufferedAmount: () => s.buffered,
  };
  return s;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function hubWith(overrides: Partial<SocketHubDeps> = {}) {
  const signals = localSignals();
  const warnings: string[] = [];
  const hub = createSocketHub({
    signals,
    render: async (id, from, to) => Array.from({ length: to - from + 1 }, (_, i) => `${id}#${from + i}`),
    renderHandshake: async (id) => `hello ${id}`,
    log: { warn: (_obj, msg) => warnings.push(msg) },
    ...overrides,
  });
  return { hub, signals, warnings };
}

describe('socket hub', () => {
  it('sends each announcement in order even when an earlier render is slower', async () => {
    const { hub } = hubWith({
      render: async (id, from) => {
        if (from === 1) await sleep(50);
        return [`${id}#${from}`];
      },
    });
    const s = fakeSocket();
    const conn = hub.open(s);
    expect(await conn?.bind('a')).toBe('bound');
    await hub.announce('a', 1, 1);
    await hub.announce('a', 2, 2);
    await sleep(100);
    expect(s.sent).toEqual(['hello a', 'a#1', 'a#2']);
  });

  it('renders nothing for a subscription no local socket is bound to', async () => {
    const calls: string[] = [];
    const { hub } = hubWith({
      render: async (id) => {
        calls.push(id);
        return [];
      },
    });
    await hub.announce('nobody', 1, 5);
    await sleep(10);
    expect(calls).toEqual([]);
  });

  it('queues an announcement made while a bind is rendering its handshake behind the handshake', async () => {
    let release = (): void => undefined;
    const { hub } = hubWith({
      renderHandshake: (id) => new Promise((r) => (release = () => r(`hello ${id}`))),
    });
    const s = fakeSocket();
    const binding = hub.open(s)?.bind('a');
    await sleep(5);
    await hub.announce('a', 3, 3);
    release();
    expect(await binding).toBe('bound');
    await sleep(10);
    expect(s.sent).toEqual(['hello a', 'a#3']);
  });

  it('logs a failed render and goes on with the next announcement', async () => {
    const { hub, warnings } = hubWith({
      render: async (id, from) => {
        if (from === 1) throw new Error('database down');
        return [`${id}#${from}`];
      },
    });
    const s = fakeSocket();
    await hub.open(s)?.bind('a');
    await hub.announce('a', 1, 1);
    await hub.announce('a', 2, 2);
    await sleep(10);
    expect(s.sent).toEqual(['hello a', 'a#2']);
    expect(warnings).toEqual(['Websocket notifications could not be rendered']);
  });

  it('answers gone, failed and the limits of a bind', async () => {
    const { hub } = hubWith({
      limits: { perSubscription: 1, bindingsPerSocket: 2, perInstance: 3 },
      renderHandshake: async (id) => {
        if (id === 'gone') return undefined;
        if (id === 'broken') throw new Error('no');
        return `hello ${id}`;
      },
    });
    const one = hub.open(fakeSocket());
    const two = hub.open(fakeSocket());
    expect(await one?.bind('gone')).toBe('gone');
    expect(await one?.bind('broken')).toBe('failed');
    expect(await one?.bind('a')).toBe('bound');
    expect(await one?.bind('a')).toBe('bound');
    expect(await two?.bind('a')).toBe('subscription-full');
    expect(await one?.bind('b')).toBe('bound');
    expect(await one?.bind('c')).toBe('too-many-bindings');
    expect(hub.open(fakeSocket())).toBeDefined();
    expect(hub.open(fakeSocket())).toBeUndefined();
    one?.end();
    expect(hub.boundCount('a')).toBe(0);
    expect(await two?.bind('a')).toBe('bound');
  });

  it('closes a socket that does not read instead of buffering without end', async () => {
    const { hub } = hubWith({ limits: { maxBufferedBytes: 100 } });
    const slow = fakeSocket();
    const fast = fakeSocket();
    await hub.open(slow)?.bind('a');
    await hub.open(fast)?.bind('a');
    slow.buffered = 1000;
    await hub.announce('a', 1, 1);
    await sleep(10);
    expect(slow.closedWith?.[0]).toBe(1013);
    expect(fast.sent).toEqual(['hello a', 'a#1']);
    expect(hub.boundCount('a')).toBe(1);
  });

  it('revokes a subscription: unbinds, tells, and closes a socket left with none', async () => {
    const { hub } = hubWith();
    const only = fakeSocket();
    const both = fakeSocket();
    await hub.open(only)?.bind('a');
    const c = hub.open(both);
    await c?.bind('a');
    await c?.bind('b');
    await hub.revoke('a');
    await sleep(10);
    expect(hub.boundCount('a')).toBe(0);
    expect(only.closedWith?.[0]).toBe(1000);
    expect(both.closedWith).toBeUndefined();
    expect(JSON.parse(both.sent.at(-1) as string)).toMatchObject({ resourceType: 'OperationOutcome' });
    expect(c?.bindings()).toBe(1);
  });

  it('ignores malformed announcements and refuses to make them', async () => {
    const { hub, signals } = hubWith();
    const s = fakeSocket();
    await hub.open(s)?.bind('a');
    for (const p of ['*', 'notify a', 'notify a 2 1', 'notify a x y', 'notify ../a 1 1', 'other a 1 1'])
      await signals.publish(SOCKETS_CHANNEL, p);
    await sleep(10);
    expect(s.sent).toEqual(['hello a']);
    await expect(hub.announce('a b', 1, 1)).rejects.toThrow(RangeError);
    await expect(hub.announce('a', 2, 1)).rejects.toThrow(RangeError);
    await expect(hub.announce('a', 1.5, 2)).rejects.toThrow(RangeError);
  });

  it('closes every socket with 1001 and opens no more', async () => {
    const { hub } = hubWith();
    const s = fakeSocket();
    await hub.open(s)?.bind('a');
    await hub.close();
    expect(s.closedWith?.[0]).toBe(1001);
    expect(hub.socketCount()).toBe(0);
    expect(hub.open(fakeSocket())).toBeUndefined();
  });

  it('sends heartbeats to bound sockets, and unbinds only what the database no longer holds live', async () => {
    let live = new Set(['a', 'b']);
    const { hub } = hubWith({
      renderHeartbeat: async (id) => `beat ${id}`,
      live: async (ids) => new Set(ids.filter((id) => live.has(id))),
      limits: { liveCheckMs: 40 },
    });
    const s = fakeSocket();
    const conn = hub.open(s);
    expect(await conn?.bind('a')).toBe('bound');
    expect(await conn?.bind('b')).toBe('bound');
    await hub.heartbeat('a');
    // A check while both are live changes nothing.
    await hub.check('a');
    await sleep(10);
    expect(s.sent).toEqual(['hello a', 'hello b', 'beat a']);
    expect(hub.boundCount('a')).toBe(1);
    // `a` turned off: the periodic check finds it without any announcement; `b` keeps the socket open.
    live = new Set(['b']);
    await sleep(120);
    expect(hub.boundCount('a')).toBe(0);
    expect(hub.boundCount('b')).toBe(1);
    expect(s.closedWith).toBeUndefined();
    expect(JSON.parse(s.sent.at(-1) as string).resourceType).toBe('OperationOutcome');
    // `b` too, told by a check: the socket has nothing left and is closed normally.
    live = new Set();
    await hub.check('b');
    await sleep(10);
    expect(s.closedWith?.[0]).toBe(1000);
    await hub.close();
  });
});
