-- remint_pairs: distinct stale → replacement session pairs (never events).
-- Server-recorded pairs (remint events): events per pair, alias hits (requests
-- still sent on the stale id and served through the alias after the re-mint),
-- adopted (some request carried the replacement) or orphaned. Proxy-inferred
-- pairs (a refused miss, then an initialize from the same client within
-- window_s, its end included, to the microsecond: proxy_remint_pairs.sql; a pair
-- for every initialize that answered one of the stale session's misses) are
-- kept apart as inferred = 1, and only where the server recorded
-- no pair for that stale session.
-- requires: proxy_remint_pairs
WITH
-- the hours the range covers whole (bound: queries/registry.ts wholeHours): whether
-- a replacement was used is read from the hourly rollups for those (0008, 0013) and
-- from the rows for the hours the range cuts. Neither read filters by service or
-- environment, so a label a rollup cannot forget changes nothing here.
{whole_hour_lo:UInt32} < {whole_hour_hi:UInt32} AS whole_hours,
-- the server's re-mints, one row each: FINAL, so a copy of a re-mint delivered again
-- in another batch (not merged yet) counts once, and one under another label only
-- under its newest (the sorting key starts with event_type: only the re-mints are
-- read and merged)
server_rows AS
(
    SELECT stale_session_key, replacement_session_key, mode, ts, event_id,
           reinterpretAsUInt128(sipHash128(stale_session_key)) AS stale_h
    FROM events FINAL
    WHERE event_type = 'remint' AND outcome != 'failed'
      AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
),
-- the server's pairs (read once, below; the sets of stale sessions come from the rows,
-- not from the pairs: the pairs' grouping on two strings was done again for each
-- reference, `remint_pairs` 830 -> 732 ms at 10M events, medians of 9 side by side)
server AS
(
    -- (the mode of the pair's first event, by (ts, event_id): any() took whichever part
    -- was read first, so two events of one pair with two modes gave the mode of the
    -- batch written first: a break-it pass)
    SELECT stale_session_key, replacement_session_key, argMin(mode, (ts, event_id)) AS mode, count() AS events,
           min(toUnixTimestamp64Micro(ts)) / 1e6 AS first_t,
           any(stale_h) AS stale_h,
           reinterpretAsUInt128(sipHash128(replacement_session_key)) AS replacement_h
    FROM server_rows
    GROUP BY stale_session_key, replacement_session_key
),
-- the sessions some server request carried (an arrival on the id, by the hashed
-- session ids), a replacement adopted when it is one of them: the whole hours'
-- from server_sessions (last_arrival: the session's latest arrival in that hour),
-- the cut hours' from server_requests. Every session, not only the replacements:
-- `h IN (SELECT replacement_h FROM server)` on the rollup took 160 ms more than
-- reading it whole (the set is built before the read, for the key's index)
adopted_server AS
(
    SELECT DISTINCT skh
    FROM
    (
        SELECT h AS skh FROM server_sessions
        WHERE whole_hours AND ts >= toDateTime({whole_hour_lo:UInt32}, 'UTC') AND ts < toDateTime({whole_hour_hi:UInt32}, 'UTC')
          AND last_arrival > 0
        UNION ALL
        SELECT skh FROM server_requests
        WHERE event_type = 'arrival'
          AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
          AND NOT (whole_hours AND ts >= {whole_from:DateTime64(6, 'UTC')} AND ts < {whole_to:DateTime64(6, 'UTC')})
    )
),
alias AS
(
    -- a copy of a settlement is dropped by its event_id: alias hits are counted;
    -- read from the server's signal rows (server_signals, schema/migrations/0012),
    -- with FINAL (a copy under another label counts under its newest one only)
    SELECT skh, groupArray(t) AS ts
    FROM
    (
        SELECT event_id, skh, t FROM server_signals FINAL
        WHERE event_type = 'settlement' AND session_resolution = 'alias'
          AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
          AND skh IN (SELECT stale_h FROM server_rows)
        LIMIT 1 BY event_id
    )
    GROUP BY skh
),
-- the sessions some proxy line carried as its session id, on any path: the whole
-- hours' from proxy_sessions (used: a line of that hour carried it), the cut
-- hours' from proxy_access (every session, as adopted_server)
proxy_used AS
(
    SELECT DISTINCT skh
    FROM
    (
        SELECT h AS skh FROM proxy_sessions
        WHERE whole_hours AND ts >= toDateTime({whole_hour_lo:UInt32}, 'UTC') AND ts < toDateTime({whole_hour_hi:UInt32}, 'UTC')
          AND used = 1
        UNION ALL
        SELECT skh FROM proxy_access
        WHERE skh != 0
          AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
          AND NOT (whole_hours AND ts >= {whole_from:DateTime64(6, 'UTC')} AND ts < {whole_to:DateTime64(6, 'UTC')})
    )
)
-- the two sources, then one total order over both (an ORDER BY after UNION ALL orders only its last SELECT)
SELECT *
FROM
(
    SELECT
        s.stale_session_key AS stale_session_key,
        s.replacement_session_key AS replacement_session_key,
        s.mode AS mode,
        toUInt8(0) AS inferred,
        s.events AS events,
        toUInt64(arrayCount(x -> x >= s.first_t, h.ts)) AS alias_hits,
        toDateTime64(s.first_t, 6, 'UTC') AS refused_at,
        toDateTime64(s.first_t, 6, 'UTC') AS reinitialized_at,
        0. AS recovery_s,
        CAST(s.replacement_h IN (SELECT skh FROM adopted_server)
             OR s.replacement_h IN (SELECT skh FROM proxy_used), 'Bool') AS adopted
    FROM server AS s
    LEFT JOIN alias AS h ON h.skh = s.stale_h
    UNION ALL
    SELECT
        p.stale_session_key AS stale_session_key,
        p.replacement_session_key AS replacement_session_key,
        'client_reinit_inferred' AS mode,
        toUInt8(1) AS inferred,
        toUInt64(1) AS events,
        toUInt64(0) AS alias_hits,
        toDateTime64(p.miss_t, 6, 'UTC') AS refused_at,
        toDateTime64(p.init_t, 6, 'UTC') AS reinitialized_at,
        round(p.init_t - p.miss_t, 3) AS recovery_s,
        p.adopted AS adopted
    FROM proxy_remint_pairs AS p
    WHERE p.stale_session_key NOT IN (SELECT stale_session_key FROM server_rows)
)
ORDER BY refused_at, inferred, stale_session_key, replacement_session_key
