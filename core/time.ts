/** Times to the microsecond, always UTC: parsing parameters and store text, and formatting them. */

/**
 * Parses a time parameter to epoch microseconds, exactly (no `Date`, which keeps only
 * milliseconds and reads a zone-less ISO string in the host's local zone).
 * Accepts epoch seconds (number or numeric string, fractions to the µs) and
 * `YYYY-MM-DD[( |T)hh:mm[:ss[.f…]]][Z|±hh[:]mm]` (RFC 3339 §5.6 with the space and the
 * missing offset ISO 8601 allows); a time without an offset is UTC, never local.
 * @returns µs since the epoch, or undefined when the text is not such a time.
 */
export function parseTimeMicros(v: number | string): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? Math.round(v * 1e6) : undefined;
  const text = v.trim();
  if (/^-?\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1e6);
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?\s*(Z|[+-]\d{2}:?\d{2})?$/i.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h = '0', mi = '0', sec = '0', frac = '', zone] = m;
  const parts = [Number(y), Number(mo), Number(d), Number(h), Number(mi), Number(sec)];
  if (parts[1]! < 1 || parts[1]! > 12 || parts[2]! < 1 || parts[2]! > 31 || parts[3]! > 23 || parts[4]! > 59 || parts[5]! > 59) return undefined;
  // (setUTCFullYear, not Date.UTC, which reads years 0-99 as 1900-1999: 0050-01-01 is
  // the year 50, found by a break-it pass)
  const date = new Date(0);
  date.setUTCFullYear(parts[0]!, parts[1]! - 1, parts[2]!);
  date.setUTCHours(parts[3]!, parts[4]!, parts[5]!, 0);
  const ms = date.getTime();
  // a day past the month's end rolls 31 February over into March: refuse what did not round-trip.
  if (date.getUTCDate() !== parts[2]) return undefined;
  let offsetMin = 0;
  if (zone && zone.toUpperCase() !== 'Z') {
    const z = /^([+-])(\d{2}):?(\d{2})$/.exec(zone)!;
    // RFC 3339 §5.6: time-numoffset hours 00-23, minutes 00-59
    if (Number(z[2]) > 23 || Number(z[3]) > 59) return undefined;
    offsetMin = (z[1] === '-' ? -1 : 1) * (Number(z[2]) * 60 + Number(z[3]));
  }
  const micros = Number(frac.padEnd(6, '0').slice(0, 6));
  return (ms - offsetMin * 60_000) * 1000 + micros;
}

/** µs since the epoch → ISO-8601 UTC with µs ('2026-11-30T04:00:08.410000Z'). */
export function isoMicros(us: number): string {
  const ms = Math.floor(us / 1000);
  const micros = String(us - ms * 1000).padStart(3, '0');
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, `.$1${micros}Z`);
}

/** µs since the epoch → `YYYY-MM-DD hh:mm:ss.ffffff` (UTC), the text a `DateTime64(6, 'UTC')` parameter takes and the store prints. */
export function formatTimeMicros(us: number): string {
  return isoMicros(us).replace('T', ' ').slice(0, -1);
}
