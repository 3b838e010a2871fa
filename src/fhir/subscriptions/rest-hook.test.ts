// Which pending events go into one rest-hook notification (rest-hook.ts): consecutive events together up to the
// subscription's limit, handshakes, heartbeats and tests alone, the order kept.
import { describe, expect, it } from 'vitest';
import type { OutboxKind } from './model.js';
import { eventsPerNotification, MAX_EVENTS_PER_NOTIFICATION, notificationGroups } from './rest-hook.js';

const rows = (kinds: string): { kind: OutboxKind; n: number }[] =>
  [...kinds].map((k, n) => ({
    kind: ({ e: 'event-notification', h: 'handshake', b: 'heartbeat', t: 'test' } as const)[k as 'e'],
    n,
  }));
const shape = (groups: { kind: OutboxKind; n: number }[][]): string =>
  groups.map((g) => g.map((r) => r.n).join(',')).join(' | ');

describe('notificationGroups', () => {
  it('puts consecutive events together up to the limit, in order', () => {
    expect(shape(notificationGroups(rows('eeeeeee'), 3))).toBe('0,1,2 | 3,4,5 | 6');
    expect(shape(notificationGroups(rows('eee'), 1))).toBe('0 | 1 | 2');
    expect(shape(notificationGroups(rows('eee'), 100))).toBe('0,1,2');
  });
  it('sends a handshake, heartbeat or test on its own, never inside a run of events', () => {
    expect(shape(notificationGroups(rows('heebeet'), 10))).toBe('0 | 1,2 | 3 | 4,5 | 6');
    expect(shape(notificationGroups(rows('tt'), 10))).toBe('0 | 1');
    expect(notificationGroups([], 5)).toEqual([]);
  });
});

describe('eventsPerNotification', () => {
  it('is one for a classic subscription, backport-max-count or the server limit for a topic', () => {
    expect(eventsPerNotification({ form: 'classic', maxCount: 50 })).toBe(1);
    expect(eventsPerNotification({ form: 'topic' })).toBe(MAX_EVENTS_PER_NOTIFICATION);
    expect(eventsPerNotification({ form: 'topic', maxCount: 7 })).toBe(7);
    expect(eventsPerNotification({ form: 'topic', maxCount: 1_000_000 })).toBe(MAX_EVENTS_PER_NOTIFICATION);
  });
});
