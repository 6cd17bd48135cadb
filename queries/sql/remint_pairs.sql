-- remint_pairs: distinct stale → replacement session pairs (never events).
-- Server-recorded pairs (remint events): events per pair, alias hits (requests
-- still sent on the stale id and served through the alias after the re-mint),
-- adopted (some request carried the replacement) or orphaned. Proxy-inferred
-- pairs (a refused miss, then an initialize from the same client within
-- window_s, its end included, to the microsecond: proxy_remint_pairs.sql) are
-- kept apart as inferred = 1, and only where the server recorded
-- no pair for that stale session.
-- requires: proxy_remint_pairs
WITH
server AS
(
    SELECT stale_session_key, replacement_session_key, any(mode) AS mode, count() AS events,
           min(toUnixTimestamp64Micro(ts)) / 1e6 AS first_t,
           reinterpretAsUInt128(sipHash128(stale_session_key)) AS stale_h,
           reinterpretAsUInt128(sipHash128(replacement_session_key)) AS replacement_h
    FROM events
    WHERE event_type = 'remint' AND outcome != 'failed'
      AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
    GROUP BY stale_session_key, replacement_session_key
),
-- the replacements some server request carried (server_requests, joined on the
-- hashed session ids): only arrivals on a replacement id are read
adopted_server AS
(
    SELECT DISTINCT skh
    FROM server_requests
    WHERE event_type = 'arrival'
      AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
      AND skh IN (SELECT replacement_h FROM server)
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
          AND skh IN (SELECT stale_h FROM server)
        LIMIT 1 BY event_id
    )
    GROUP BY skh
),
proxy_used AS
(
    SELECT DISTINCT skh
    FROM proxy_access
    WHERE skh IN (SELECT replacement_h FROM server)
      AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
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
    WHERE p.stale_session_key NOT IN (SELECT stale_session_key FROM server)
)
ORDER BY refused_at, inferred, stale_session_key, replacement_session_key
