import { describe, expect, it } from 'vitest';
import { createUuidV7Generator } from './uuidv7.ts';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('createUuidV7Generator (RFC 9562 §5.7)', () => {
  it('carries the Unix ms timestamp, version 7 and variant 10', () => {
    const id = createUuidV7Generator(() => 0x0123_4567_89ab)();
    expect(id).toMatch(V7);
    expect(id.replace(/-/g, '').slice(0, 12)).toBe('0123456789ab');
  });

  it('is strictly increasing within one millisecond, across counter overflow, and when the clock steps back', () => {
    let now = 1_700_000_000_000;
    const next = createUuidV7Generator(() => now);
    const ids: string[] = [];
    for (let i = 0; i < 10_000; i++) ids.push(next());
    now -= 5;
    ids.push(next());
    for (const id of ids) expect(id).toMatch(V7);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
