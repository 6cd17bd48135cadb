import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prng } from '../bench/prng.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// session_continuity's survived_1/2 (queries/sql/session_continuity.sql) count, per
// session, the restarts of its service it straddled: a restart span (service, lo,
// hi) with lo > the session's first 2xx and hi < its last, where the span and the
// session share a service label or either has none. This test runs the query's own
// text over random sessions and spans, with ties in start and end, overlapping spans
// and sessions of several labels, and compares every session's counts with the
// definition evaluated directly. The query finds the two earliest ends among the spans
// starting after the first 2xx (an ASOF join on the start, and running minimums per
// service group) instead of testing every span against every session (30,000
// restarts took 13.9 s; docs/queries.md, "Sessions × restarts").

interface Span { service: string; lo: number; hi: number }
interface Session { first: number; last: number; services: string[] }

/** The definition: how many of `spans` `s` straddled (0 without a 2xx). */
function crossed(s: Session, spans: Span[]): number {
  if (s.last <= 0) return 0;
  return spans.filter((p) => p.lo > s.first && p.hi < s.last && (p.service === '' || s.services.length === 0 || s.services.includes(p.service))).length;
}

const lit = (v: string) => `'${v}'`;

/** session_continuity.sql with session_facts and restart_spans given as literal rows. */
function continuitySql(sessions: Session[], spans: Span[]): string {
  const text = readFileSync(new URL('../queries/sql/session_continuity.sql', import.meta.url), 'utf8').replace(/^--\s*requires:.*$/m, '');
  // (the query's own WITH list, if it has one, continues after the two given here)
  const own = /^\s*WITH\b/m.exec(text);
  const facts = sessions
    .map((s, i) => `(${i + 1}, 's${i}', '', 0, 1, 0, 0, 0, 0, ${s.first}, ${s.last}, [${s.services.map(lit).join(', ')}])`)
    .join(',\n');
  const spanRows = spans.length === 0
    ? `SELECT '' AS service, 0. AS lo, 0. AS hi WHERE 0`
    : `SELECT * FROM values('service String, lo Float64, hi Float64', ${spans.map((p) => `(${lit(p.service)}, ${p.lo}, ${p.hi})`).join(', ')})`;
  return `WITH
session_facts AS
(
    SELECT * FROM values('session_key UInt128, ua_family String, origin String, was_minted Bool, was_used Bool, is_stale Bool,
                          is_recovered Bool, refused_before_range Bool, is_abandoned Bool, first_ok_t Float64, last_ok_t Float64,
                          services Array(String)',
    ${facts})
),
restart_spans AS (${spanRows})${own ? `,\n${text.slice(own.index + own[0].length)}` : `\n${text}`}`;
}

function world(seed: number, nSpans: number): { sessions: Session[]; spans: Span[] } {
  const r = prng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
  const labels = ['a', 'b', 'c'];
  // whole and half seconds on a short grid: many equal starts, ends and 2xx times
  const at = () => Math.floor(r() * 80) / 2;
  const spans: Span[] = Array.from({ length: nSpans }, () => {
    const lo = at();
    return { service: pick(['', ...labels, ...labels]), lo, hi: lo + pick([0, 0.5, 1, 3, 12]) };
  });
  const sessions: Session[] = Array.from({ length: 400 }, () => {
    if (r() < 0.1) return { first: 0, last: 0, services: [] };
    const a = at();
    const b = at();
    const services = labels.filter(() => r() < 0.35);
    return { first: Math.min(a, b), last: Math.max(a, b), services };
  });
  return { sessions, spans };
}

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('survivors_spans');
});
afterAll(async () => {
  await t?.close();
});

describe('survivors: the two earliest ends after the first 2xx', () => {
  it.each([
    [1, 40],
    [2, 40],
    [3, 7],
    [4, 1],
    [5, 0],
    [6, 120],
  ])('seed %i, %i restart spans: every session as the definition counts it', async (seed, nSpans) => {
    const { sessions, spans } = world(seed, nSpans);
    const rows = await t.store.query<{ ua_family: string; sessions: number; survived_1: number; survived_2: number }>(continuitySql(sessions, spans));
    const got = new Map(rows.map((row) => [row.ua_family, [Number(row.survived_1), Number(row.survived_2)]]));
    const want = new Map(sessions.map((s, i) => {
      const n = crossed(s, spans);
      return [`s${i}`, [n >= 1 ? 1 : 0, n >= 2 ? 1 : 0]];
    }));
    expect(rows).toHaveLength(sessions.length);
    expect(got).toEqual(want);
    // the worlds are not trivial: some sessions crossed one restart, some two
    if (nSpans >= 40) {
      expect([...want.values()].filter(([, two]) => two === 1).length).toBeGreaterThan(10);
      expect([...want.values()].filter(([one, two]) => one === 1 && two === 0).length).toBeGreaterThan(10);
    }
  });
});
