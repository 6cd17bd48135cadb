-- session_facts: one row per session (its keyed id) seen in the range, from proxy
-- and server evidence together (both sources hash ids with the same deployment
-- key), with what happened to it (session_continuity.sql counts these by
-- user-agent family and origin; the session_outcomes check, for the canary
-- report, counts them without the restarts):
--   ua_family, origin    the largest (hashed client, family, origin) where a
--                        session has several
--   was_minted, was_used an initialize minted the id; some request carried it
--   is_stale             the session got at least one refused miss
--   is_recovered         stale, and re-minted by the server (a remint pair) or
--                        its client re-initialized (an inferred pair), at or
--                        after its last refused miss (2 s of clock slack)
--   refused_before_range stale, and refused before the range began too (the canary's
--                        deploy window: a session an earlier restart broke,
--                        still resending its id, is not this one's)
--   is_abandoned         its last request failed and the same client sent no
--                        initialize within window_s afterwards
--   first_ok_t, last_ok_t its first and last 2xx (seconds; 0 = none)
--   services             the service labels its requests carried, either source's
--                        (none: unlabelled); session_continuity.sql counts a
--                        restart only for the sessions of its service
-- Every "within window_s" includes its end and is exact to the microsecond: the
-- float seconds are compared as whole microseconds (as in refused_misses.sql).
-- Sessions and clients are joined on their hashed keys (proxy_access and
-- server_requests, schema/migrations/0006-0007). Every per-session fact below is
-- an existence, a minimum or a maximum, so a re-delivered copy of an event changes
-- nothing.
--
-- Where the facts come from (schema/migrations/0008, 0016):
--  * per session: the days t_from..t_to covers whole come from the daily rollups
--    proxy_sessions_daily and server_sessions_daily (0016), its other whole hours
--    from the hourly proxy_sessions and server_sessions, the hours it cuts from the
--    rows, combined with the same functions, so any range is exact. A line
--    re-imported under another --service keeps its old label in a rollup (a rollup
--    cannot forget), so when a service or environment filter is given the proxy
--    facts come from the rows, read with FINAL (a relabelled line counts under its
--    newest label); without a filter a label changes nothing here. The server's
--    requests are read without FINAL, as before the rollups (a relabelled server
--    event counts under both labels until a merge), so the server rollups serve
--    every case.
--  * the rare rows (proxy refused misses, server refused misses and initializes,
--    re-mints) come from the rows: refused misses and initializes from the
--    signal rows (schema/migrations/0012), both read with FINAL (a relabelled one
--    counts under its newest label only).
-- requires: proxy_lines, proxy_signal_lines, server_signal_rows
WITH
-- the hours read whole from the rollups: [hour_lo, hour_hi), seconds (bound:
-- queries/registry.ts wholeHours)
{whole_hour_lo:UInt32} AS hour_lo,
{whole_hour_hi:UInt32} AS hour_hi,
-- the days among them, read whole from the daily rollups (0016): [day_lo, day_hi)
-- (empty when day_lo >= day_hi)
{whole_day_lo:UInt32} AS day_lo,
{whole_day_hi:UInt32} AS day_hi,
hour_lo < hour_hi AS whole_hours,
whole_hours AND {service:String} = '' AND {environment:String} = '' AS proxy_rollup,
{whole_from:DateTime64(6, 'UTC')} AS whole_from,
{whole_to:DateTime64(6, 'UTC')} AS whole_to,
-- the proxy's session lines (a request session key, or an initialize) that the
-- rollup does not cover: the cut hours, or every hour under a filter
raw_lines AS
(
    SELECT toStartOfHour(ts) AS hour, t, skh, rkh, clienth, ua_family, origin, ok, refused, init, pg, service
    FROM proxy_lines
    WHERE NOT (proxy_rollup AND ts >= whole_from AND ts < whole_to)
      AND (skh != 0 OR init)
),
-- the server's requests in the range and scope (inlined where read: each reader's
-- filter and columns reach the scan)
srv AS
(
    SELECT * FROM server_requests
    WHERE ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
),
-- the server's requests the rollup does not cover (the cut hours)
raw_srv AS
(
    SELECT toString(boot_id) AS boot_id, t, skh, mkh, clienth, toString(ua_family) AS ua_family, event_type, http_status, ok, refused, init, service
    FROM srv
    WHERE NOT (whole_hours AND ts >= whole_from AND ts < whole_to)
),
-- the proxy's refused misses on a session (FINAL: under the newest label), from
-- the signal rows (proxy_signal_lines.sql)
refused AS
(
    SELECT skh, clienth, t
    FROM proxy_signal_lines
    WHERE refused AND skh != 0
),
-- the proxy's initializes: (minted key, client, t), read once, from the signal rows
-- (proxy_signal_lines.sql: FINAL, so under a filter a relabelled one counts under
-- its newest label; 28 ms at 10M events against 47 from the rollup's inits)
(
    -- one per client and µs, the least key, as proxy_remint_pairs.sql's inits (an ASOF
    -- join keeps whichever of the rows that tie it read first)
    SELECT groupArray((h, clienth, t)) FROM (SELECT min(rkh) AS h, clienth, t FROM proxy_signal_lines WHERE init GROUP BY clienth, t)
) AS init_rows,
proxy_inits_all AS (SELECT x.1 AS h, x.2 AS clienth, x.3 AS t FROM (SELECT arrayJoin(init_rows) AS x)),
-- the server's initializes, read once
(
    SELECT groupArray((clienth, t)) FROM server_signal_rows WHERE init
) AS server_init_rows,
-- one row per initialize: readers find a client's first one after a time with
-- an ASOF join (a client may hold thousands of sessions: no per-client arrays)
server_inits AS (SELECT x.1 AS clienth, x.2 AS t, toUInt8(1) AS hit FROM (SELECT arrayJoin(server_init_rows) AS x)),
-- recoveries of a stale session and when they happened: server re-mints, inferred
-- pairs (the re-initialize), and refused misses the same client answered with an
-- initialize; a stale session is recovered only by one at or after its last refused
-- miss (2 s of clock slack), not by an earlier one
remint_candidates AS
(
    -- inferred re-mints (proxy_remint_pairs.sql): a refused miss, then an initialize
    -- from the same client within window_s; each replacement credited to the
    -- latest miss before it. Every replacement that answered one of a session's
    -- misses, as proxy_remint_pairs.sql pairs them: the one after its last miss
    -- recovers it.
    SELECT m.skh AS c_stale_h, i.h AS c_replacement_h, i.t AS c_init_t, max(m.t) AS c_miss_t
    FROM refused AS m
    ASOF INNER JOIN proxy_inits_all AS i ON i.clienth = m.clienth AND m.t <= i.t
    WHERE round((i.t - m.t) * 1e6) <= round({window_s:Float64} * 1e6)
    GROUP BY m.skh, i.h, i.t
),
-- (arh: the arrival to take the client from, where the miss lacks a user agent or
-- principal, as server_refused.sql; 0: the miss's own client)
(
    SELECT groupArray((skh, t, if(own_client, toUInt128(0), arh), clienth)) FROM server_signal_rows WHERE refused
) AS server_refused_array,
server_refused_rows AS
(
    SELECT x.1 AS skh, x.2 AS t, x.3 AS arh, x.4 AS clienth FROM (SELECT arrayJoin(server_refused_array) AS x)
),
server_reinit AS
(
    -- server_refused.sql's next = 'initialize': the client (of the refused miss,
    -- else of its arrival) initialized within window_s after it; the arrivals are
    -- read only for misses without a client of their own
    SELECT q.skh AS skh, q.t AS t
    FROM
    (
        SELECT r.skh AS skh, r.t AS t, if(a.arh != 0, a.clienth, r.clienth) AS clienth
        FROM server_refused_rows AS r
        LEFT JOIN
        (
            SELECT arh, clienth FROM srv
            WHERE event_type = 'arrival' AND arh IN (SELECT arh FROM server_refused_rows WHERE arh != 0)
        ) AS a ON a.arh = r.arh AND r.arh != 0
    ) AS q
    ASOF INNER JOIN server_inits AS i ON i.clienth = q.clienth AND q.t < i.t
    WHERE round((i.t - q.t) * 1e6) <= round({window_s:Float64} * 1e6)
),
recovered_keys AS
(
    SELECT skh, max(rt) AS rt
    FROM
    (
        -- (FINAL: a re-mint under another label counts under its newest one only)
        SELECT reinterpretAsUInt128(sipHash128(stale_session_key)) AS skh, toUnixTimestamp64Micro(ts) / 1e6 AS rt FROM events FINAL
        WHERE event_type = 'remint' AND outcome != 'failed' AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
        UNION ALL
        SELECT argMax(c_stale_h, (c_miss_t, c_stale_h)) AS skh, min(c_init_t) AS rt FROM remint_candidates GROUP BY c_replacement_h
        UNION ALL
        SELECT skh, t AS rt FROM server_reinit
    )
    GROUP BY skh
),
per_session AS
(
    -- one aggregation over both sources' rows (src 0 the proxy, 1 the server), each
    -- source's facts kept apart by -If until the projection below combines them.
    -- The server's facts count only where it used or minted the id (s_valid); a
    -- source's latest request (p_last, s_last_t) says whether it failed: the proxy's
    -- latest request's status, the server's latest settlement or refused miss (none:
    -- not a success; ties between requests go to the failure).
    SELECT
        h AS session_key,
        greatest(p_ua_family, if(s_valid, s_ua_family, '')) AS ua_family,
        p_origin AS origin,
        p_client,
        if(s_valid, s_client_any, toUInt128(0)) AS s_client,
        p_minted = 1 OR (s_valid AND s_minted = 1) AS was_minted,
        p_used = 1 OR (s_valid AND s_used = 1) AS was_used,
        greatest(p_last_refused, if(s_valid, s_last_refused, 0.)) AS last_refused_t,
        last_refused_t > 0 AS is_stale,
        -- the first 2xx of either source (inf or 0: none)
        least(if(p_first_ok > 0 AND isFinite(p_first_ok), p_first_ok, inf),
              if(s_valid AND s_first_ok > 0 AND isFinite(s_first_ok), s_first_ok, inf)) AS first_ok_any,
        if(isInfinite(first_ok_any), 0., first_ok_any) AS first_ok_t,
        greatest(p_last_ok, if(s_valid, s_last_ok, 0.)) AS last_ok_t,
        (intDiv(p_last_key, 2) / 1e6, toUInt8(p_last_key % 2)) AS p_last,
        greatest(p_last.1, if(s_valid, s_last_t, 0.)) AS session_last_t,
        -- the latest request of either source; a request one source saw fail
        -- (a 2xx carrying a tool error) failed ((0, 0): the source has none)
        if(s_valid, (s_last_t, if(s_last_key < 2, toUInt8(1), toUInt8(s_last_key % 2))), (0., toUInt8(0))) AS s_latest,
        if(p_last >= s_latest, p_last, s_latest).2 = 1 AND was_used AS last_failed,
        services
    FROM
    (
        SELECT
            h,
            countIf(src = 0) > 0 AS p_seen,
            maxIf(client, src = 0) AS p_client,
            maxIf(ua_family, src = 0) AS p_ua_family,
            maxIf(origin, src = 0) AS p_origin,
            maxIf(used, src = 0) AS p_used,
            maxIf(minted, src = 0) AS p_minted,
            minIf(first_ok, src = 0) AS p_first_ok,
            maxIf(last_ok, src = 0) AS p_last_ok,
            maxIf(last_key, src = 0) AS p_last_key,
            maxIf(last_refused, src = 0) AS p_last_refused,
            maxIf(client, src = 1) AS s_client_any,
            maxIf(ua_family, src = 1) AS s_ua_family,
            maxIf(used, src = 1) AS s_used,
            maxIf(minted, src = 1) AS s_minted,
            s_used = 1 OR s_minted = 1 AS s_valid,
            minIf(first_ok, src = 1) AS s_first_ok,
            maxIf(last_ok, src = 1) AS s_last_ok,
            maxIf(last_t, src = 1) AS s_last_t,
            maxIf(last_key, src = 1) AS s_last_key,
            maxIf(last_refused, src = 1) AS s_last_refused,
            groupUniqArrayIf(service, service != '') AS services
        FROM
        (
            SELECT toUInt8(0) AS src, h, client, ua_family, origin, used, minted, first_ok, last_ok, 0. AS last_t, toInt64(round(last.1 * 1e6)) * 2 + last.2 AS last_key, last_refused, service
            FROM proxy_sessions_daily
            WHERE proxy_rollup AND ts >= toDateTime(day_lo, 'UTC') AND ts < toDateTime(day_hi, 'UTC')
              AND url_path IN {endpoint_paths:Array(String)}
            UNION ALL
            SELECT toUInt8(0) AS src, h, client, ua_family, origin, used, minted, first_ok, last_ok, 0. AS last_t, toInt64(round(last.1 * 1e6)) * 2 + last.2 AS last_key, last_refused, service
            FROM proxy_sessions
            WHERE proxy_rollup AND ts >= toDateTime(hour_lo, 'UTC') AND ts < toDateTime(hour_hi, 'UTC')
              AND NOT (ts >= toDateTime(day_lo, 'UTC') AND ts < toDateTime(day_hi, 'UTC'))
              AND url_path IN {endpoint_paths:Array(String)}
            UNION ALL
            SELECT toUInt8(0), if(skh != 0, skh, rkh) AS h, clienth, toString(ua_family), toString(origin), toUInt8(skh != 0), toUInt8(init),
                   if(skh != 0 AND ok, t, inf), if(skh != 0 AND ok, t, 0.), 0., if(skh != 0, toInt64(round(t * 1e6)) * 2 + NOT ok, toInt64(0)),
                   if(skh != 0 AND refused, t, 0.), service
            FROM raw_lines
            UNION ALL
            SELECT toUInt8(1) AS src, h, client, ua_family, '' AS origin, used, minted, first_ok, last_ok, last_t, toInt64(round(last.1 * 1e6)) * 2 + last.2 AS last_key, last_refused, service
            FROM server_sessions_daily
            WHERE ts >= toDateTime(day_lo, 'UTC') AND ts < toDateTime(day_hi, 'UTC')
              AND ({service:String} = '' OR service = {service:String})
              AND ({environment:String} = '' OR environment = {environment:String})
            UNION ALL
            SELECT toUInt8(1) AS src, h, client, ua_family, '' AS origin, used, minted, first_ok, last_ok, last_t, toInt64(round(last.1 * 1e6)) * 2 + last.2 AS last_key, last_refused, service
            FROM server_sessions
            WHERE whole_hours AND ts >= toDateTime(hour_lo, 'UTC') AND ts < toDateTime(hour_hi, 'UTC')
              AND NOT (ts >= toDateTime(day_lo, 'UTC') AND ts < toDateTime(day_hi, 'UTC'))
              AND ({service:String} = '' OR service = {service:String})
              AND ({environment:String} = '' OR environment = {environment:String})
              AND h != 0
            UNION ALL
            SELECT toUInt8(1), k.1 AS h, if(k.2 = 1 OR NOT init, clienth, toUInt128(0)), if(k.2 = 1 OR NOT init, ua_family, ''), '',
                   toUInt8(k.2 = 0 AND NOT init), toUInt8(k.2 = 1),
                   if(k.2 = 0 AND ok, t, inf), if(k.2 = 0 AND ok, t, 0.), if(k.2 = 0 AND NOT init, t, 0.),
                   if(k.2 = 0 AND event_type != 'arrival', toInt64(round(t * 1e6)) * 2 + NOT ok, toInt64(0)), if(k.2 = 0 AND refused, t, 0.), service
            FROM raw_srv
            ARRAY JOIN [(skh, toUInt8(0)), (mkh, toUInt8(1))] AS k
            WHERE k.1 != 0 AND (k.2 = 0 OR event_type = 'settlement')
        )
        GROUP BY h
    )
    WHERE p_seen OR s_valid
),
-- the sessions refused before the range began: the hourly rollups for the hours
-- before t_from's hour, the rows for the part of that hour before t_from
-- (from_hour: the start of t_from's hour, s; 0 before 1970, which the rollups'
-- DateTime cannot hold). Every such session, not only the range's stale ones
-- (refused_before_range below asks is_stale too): restricting them by a join to
-- per_session computed per_session a second time (the canary's 15-minute window:
-- 909 -> 699 ms, medians of 5 side by side, 2026-12-02)
intDiv(greatest(toUnixTimestamp64Micro({t_from:DateTime64(6, 'UTC')}), 0), 3600000000) * 3600 AS from_hour,
stale_before AS
(
    SELECT DISTINCT h
    FROM
    (
        SELECT h FROM proxy_sessions
        WHERE ts < toDateTime(from_hour, 'UTC') AND last_refused > 0
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
          AND url_path IN {endpoint_paths:Array(String)}
        UNION ALL
        SELECT skh AS h FROM proxy_signals FINAL
        WHERE ts >= fromUnixTimestamp64Micro(toInt64(from_hour) * 1000000) AND ts < {t_from:DateTime64(6, 'UTC')} AND refused AND skh != 0
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
          AND url_path IN {endpoint_paths:Array(String)}
        UNION ALL
        SELECT h FROM server_sessions
        WHERE ts < toDateTime(from_hour, 'UTC') AND last_refused > 0
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
        UNION ALL
        SELECT skh AS h FROM server_signals FINAL
        WHERE ts >= fromUnixTimestamp64Micro(toInt64(from_hour) * 1000000) AND ts < {t_from:DateTime64(6, 'UTC')} AND refused AND skh != 0
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
    )
)
SELECT
    s.session_key AS session_key,
    s.ua_family AS ua_family,
    s.origin AS origin,
    s.was_minted AS was_minted,
    s.was_used AS was_used,
    s.is_stale AS is_stale,
    -- recovered by a re-mint or re-initialize at or after its last refused miss
    s.is_stale AND rk.skh != 0 AND rk.rt >= s.last_refused_t - 2 AS is_recovered,
    s.is_stale AND sb.h != 0 AS refused_before_range,
    -- its last request failed and its client sent no initialize within window_s after it
    s.last_failed
        AND NOT (pi.hit = 1 AND round((pi.t - s.session_last_t) * 1e6) <= round({window_s:Float64} * 1e6))
        AND NOT (si.hit = 1 AND round((si.t - s.session_last_t) * 1e6) <= round({window_s:Float64} * 1e6)) AS is_abandoned,
    s.first_ok_t AS first_ok_t,
    s.last_ok_t AS last_ok_t,
    s.services AS services
FROM per_session AS s
LEFT JOIN recovered_keys AS rk ON rk.skh = s.session_key
LEFT JOIN stale_before AS sb ON sb.h = s.session_key
-- the client's first initialize at or after the session's last request (ASOF)
ASOF LEFT JOIN (SELECT clienth, t, toUInt8(1) AS hit FROM proxy_inits_all) AS pi ON pi.clienth = s.p_client AND s.session_last_t <= pi.t
ASOF LEFT JOIN server_inits AS si ON si.clienth = s.s_client AND s.session_last_t <= si.t
