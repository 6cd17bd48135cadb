import { describe, expect, it } from 'vitest';
import { formatTimeMicros, parseTimeMicros } from '../core/time.ts';
import { bindParams, wholeHours } from './registry.ts';

describe('time parameters (parseTimeMicros)', () => {
  it('keeps microseconds exactly, in both notations and as epoch seconds', () => {
    const us = parseTimeMicros('2026-11-30 04:04:32.545441');
    expect(us).toBe(Date.UTC(2026, 10, 30, 4, 4, 32) * 1000 + 545441);
    expect(parseTimeMicros('2026-11-30T04:04:32.545441Z')).toBe(us);
    expect(parseTimeMicros('1796011472.545441')).toBe(us);
    expect(formatTimeMicros(us!)).toBe('2026-11-30 04:04:32.545441');
  });

  it('reads a time without an offset as UTC, and applies an offset when there is one (RFC 3339)', () => {
    const utc = parseTimeMicros('2026-11-30 04:04:40');
    expect(parseTimeMicros('2026-11-30T04:04:40')).toBe(utc);
    expect(parseTimeMicros('2026-11-30T13:04:40+09:00')).toBe(utc);
    expect(parseTimeMicros('2026-11-29T23:04:40-0500')).toBe(utc);
    expect(parseTimeMicros('2026-11-30')).toBe(Date.UTC(2026, 10, 30) * 1000);
  });

  it('refuses what is not a calendar time', () => {
    for (const bad of ['2026-02-31 00:00:00', '2026-13-01', '2026-11-30 24:00:00', 'yesterday', '2026-11-30 04:04:40 UTC+1', '', '2026-11-30T04:00:00+99:00', '2026-11-30T04:00:00-05:60']) {
      expect(parseTimeMicros(bad), bad).toBeUndefined();
    }
  });

  it('reads the years 0-99 as written (not as 1900-1999), so a range there is refused as before 1900', () => {
    expect(new Date(parseTimeMicros('0050-01-01')! / 1000).getUTCFullYear()).toBe(50);
    expect(new Date(parseTimeMicros('0000-03-01T12:00:00Z')! / 1000).toISOString()).toBe('0000-03-01T12:00:00.000Z');
    expect(parseTimeMicros('0099-02-29')).toBeUndefined();
    for (const t_from of ['0050-01-01', '0026-11-30T04:04:50Z', '0099-12-31 23:59:59']) {
      expect(() => bindParams('restarts', { t_from }), t_from).toThrow(/from 1900 to 2200/);
    }
  });

  it('refuses eight digits that are also a compact date (20261203), and keeps epoch seconds otherwise', () => {
    // (a break-it pass: --from 20261203 ran from 1970-08-23 12:06:43)
    expect(() => bindParams('restarts', { t_from: '20261203' })).toThrow(/20261203 is ambiguous: epoch seconds \(1970-08-23 12:06:43\) or the date 2026-12-03: write the date as 2026-12-03, or the seconds as 20261203\.0/);
    expect(bindParams('restarts', { t_from: '20261203.0' })).toMatchObject({ t_from: '1970-08-23 12:06:43.000000' });
    expect(bindParams('restarts', { t_from: 20261203 })).toMatchObject({ t_from: '1970-08-23 12:06:43.000000' });
    // not a date: read as epoch seconds, as before
    expect(bindParams('restarts', { t_from: '20261399' })).toMatchObject({ t_from: formatTimeMicros(20261399e6) });
    // a date outside 1900-2200 is no reading of its own (a break-it pass was told to write 9999-12-31)
    expect(bindParams('restarts', { t_from: '99991231' })).toMatchObject({ t_from: formatTimeMicros(99991231e6) });
    expect(bindParams('restarts', { t_from: '22000102' })).toMatchObject({ t_from: formatTimeMicros(22000102e6) });
    expect(bindParams('restarts', { t_from: '1796011472' })).toMatchObject({ t_from: '2026-11-30 04:04:32.000000' });
    expect(bindParams('restarts', { t_from: '0' })).toMatchObject({ t_from: '1970-01-01 00:00:00.000000' });
  });

  it('lets a range inside one millisecond through, and orders by microseconds', () => {
    const p = bindParams('proxy_traffic', { t_from: '2026-11-30 04:04:32.545440', t_to: '2026-11-30 04:04:32.545999' });
    expect(p).toMatchObject({ t_from: '2026-11-30 04:04:32.545440', t_to: '2026-11-30 04:04:32.545999' });
    expect(() => bindParams('proxy_traffic', { t_from: '2026-11-30 04:04:32.545999', t_to: '2026-11-30 04:04:32.545440' })).toThrow(/must be before/);
  });
});

describe('the hours a range covers whole (wholeHours)', () => {
  const s = (iso: string) => Date.parse(iso) / 1000;
  const whole = (t_from: string, t_to: string) => wholeHours(bindParams('session_continuity', { t_from, t_to }));

  it('rounds t_from up and t_to down to the hour, to the microsecond', () => {
    expect(whole('2026-11-30 04:10:00', '2026-11-30 07:55:00')).toEqual({
      whole_hour_lo: s('2026-11-30T05:00:00Z'),
      whole_hour_hi: s('2026-11-30T07:00:00Z'),
      // (no whole day: lo >= hi)
      whole_day_lo: s('2026-12-01T00:00:00Z'),
      whole_day_hi: s('2026-11-30T00:00:00Z'),
      whole_from: '2026-11-30 05:00:00.000000',
      whole_to: '2026-11-30 07:00:00.000000',
    });
    expect(whole('2026-11-30 04:00:00', '2026-11-30 06:00:00')).toMatchObject({ whole_hour_lo: s('2026-11-30T04:00:00Z'), whole_hour_hi: s('2026-11-30T06:00:00Z') });
    // one microsecond past the hour is not the hour
    expect(whole('2026-11-30 04:00:00.000001', '2026-11-30 05:59:59.999999')).toMatchObject({ whole_hour_lo: s('2026-11-30T05:00:00Z'), whole_hour_hi: s('2026-11-30T05:00:00Z') });
  });

  it('holds no hour before 1970 or after the rollups’ last (their DateTime is UInt32 seconds)', () => {
    expect(whole('1960-01-01 00:00:00', '1969-12-31 00:00:00')).toMatchObject({ whole_hour_lo: 0, whole_hour_hi: 0 });
    expect(whole('1960-01-01 00:00:00', '2199-01-01 00:00:00')).toEqual({
      whole_hour_lo: 0,
      whole_hour_hi: 4_294_965_600,
      whole_day_lo: 0,
      whole_day_hi: 4_294_944_000,
      whole_from: '1970-01-01 00:00:00.000000',
      whole_to: '2106-02-07 06:00:00.000000',
    });
    const late = whole('2150-01-01 00:00:00', '2199-01-01 00:00:00');
    expect(late.whole_hour_lo).toBeGreaterThanOrEqual(late.whole_hour_hi);
    expect(late.whole_day_lo).toBeGreaterThanOrEqual(late.whole_day_hi);
    // the rollups' last day, cut: the day rounded up from 01:00 would be 2106-02-08,
    // past the UInt32 the bound is, and wrapped to 1970 it made 1970-2106 whole days
    const last = whole('2106-02-07 01:00:00', '2199-01-01 00:00:00');
    expect(last.whole_day_lo).toBeLessThanOrEqual(2 ** 32 - 1);
    expect(last.whole_day_lo).toBeGreaterThanOrEqual(last.whole_day_hi);
  });
});
