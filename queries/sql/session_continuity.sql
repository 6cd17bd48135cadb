-- session_continuity: what happened to sessions, by user-agent family and origin,
-- from proxy and server evidence together (a session is its keyed id; both
-- sources hash ids with the same deployment key).
--   minted_unused:       an initialize minted the id, no request ever carried it back
--                        (e.g. a browser client that never returns Mcp-Session-Id)
--   stale:               the session got at least one refused miss
--   recovered:           a stale session that was re-minted by the server (a remint
--                        pair) or whose client re-initialized (an inferred pair)
--   unrecovered_stale:   a stale session never recovered
--   abandoned_after_failure: the session's last request failed and the same client
--                        sent no initialize within window_s afterwards
--   survived_1/survived_2: sessions with 2xx both before and after at least one / two restarts
-- Sessions and clients are joined on their hashed keys (proxy_access and
-- server_requests, schema/migrations/0006-0007). Every per-session fact below is
-- an existence, a minimum or a maximum, so a re-delivered copy of an event changes
-- nothing. The proxy lines come through proxy_lines (FINAL: a relabelled line counts
-- under its newest label); the server rows are read without FINAL, as before the
-- derived tables (a relabelled server event counts under both until a merge).
-- requires: proxy_lines, proxy_remint_pairs, proxy_restarts, server_boots, server_refused
WITH
r AS
(
    SELECT t, skh, rkh, clienth, ua_family, origin, ok, refused, init
    FROM proxy_lines
),
srv AS
(
    -- server view of requests: a settlement is one request's end; ok = outcome ok
    SELECT skh, clienth, ua_family, t, event_type, ok, refused, init, mkh
    FROM server_requests
    WHERE ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
),
restarts AS
(
    -- server restarts, plus proxy-inferred ones that bracket no server boot
    SELECT groupArray((lo, hi)) AS spans
    FROM
    (
        SELECT down_from AS lo, boot_t AS hi
        FROM server_boots
        WHERE is_restart
        UNION ALL
        SELECT p.down_from AS lo, ifNull(p.up_at, p.down_from) AS hi
        FROM proxy_restarts AS p
        WHERE NOT arrayExists(b -> b >= p.down_from - 1 AND b <= ifNull(p.up_at, p.down_from) + 1,
            (SELECT groupArray(boot_t) FROM server_boots WHERE is_restart))
    )
),
-- recoveries of a stale session and when they happened: server re-mints, inferred
-- pairs (the re-initialize), and refused misses the same client answered with an
-- initialize; a stale session is recovered only by one at or after its last refused
-- miss (2 s of clock slack), not by an earlier one
recovered_keys AS
(
    SELECT skh, max(rt) AS rt
    FROM
    (
        SELECT reinterpretAsUInt128(sipHash128(stale_session_key)) AS skh, toUnixTimestamp64Micro(ts) / 1e6 AS rt FROM events
        WHERE event_type = 'remint' AND outcome != 'failed' AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
        UNION ALL
        SELECT stale_h AS skh, init_t AS rt FROM proxy_remint_pairs
        UNION ALL
        SELECT skh, t AS rt FROM server_refused WHERE next = 'initialize'
    )
    GROUP BY skh
),
proxy_inits AS (SELECT clienth, groupArray(t) AS ts FROM r WHERE init GROUP BY clienth),
server_inits AS (SELECT clienth, groupArray(t) AS ts FROM srv WHERE init GROUP BY clienth),
per_source AS
(
    -- one row per session and source (a session keeps its client; any one is kept)
    SELECT skh, any(clienth) AS p_client, toUInt128(0) AS s_client, anyIf(ua_family, ua_family != '') AS ua_family,
           anyIf(origin, origin != '') AS origin, countIf(refused) AS refused_n,
           minIf(t, ok) AS first_ok, maxIf(t, ok) AS last_ok, countIf(ok) AS ok_n, max(t) AS last_t, argMax(ok, t) AS last_ok_flag,
           toUInt8(0) AS minted, toUInt8(1) AS used, maxIf(t, refused) AS last_refused
    FROM r WHERE skh != 0 GROUP BY skh
    UNION ALL
    SELECT rkh AS skh, clienth AS p_client, toUInt128(0) AS s_client, ua_family, origin, 0, 0., 0., 0, 0., 1, toUInt8(1), toUInt8(0), 0.
    FROM r WHERE init
    UNION ALL
    SELECT skh, toUInt128(0) AS p_client, any(clienth) AS s_client, anyIf(ua_family, ua_family != '') AS ua_family, '' AS origin,
           countIf(refused) AS refused_n, minIf(t, ok) AS first_ok, maxIf(t, ok) AS last_ok, countIf(ok) AS ok_n, max(t) AS last_t,
           argMaxIf(ok, t, event_type != 'arrival') AS last_ok_flag, toUInt8(0), toUInt8(1), maxIf(t, refused)
    FROM srv WHERE skh != 0 AND NOT init GROUP BY skh
    UNION ALL
    SELECT mkh AS skh, toUInt128(0) AS p_client, clienth AS s_client, ua_family, '' AS origin, 0, 0., 0., 0, 0., 1, toUInt8(1), toUInt8(0), 0.
    FROM srv WHERE event_type = 'settlement' AND mkh != 0
),
per_session AS
(
    SELECT
        skh AS session_key,
        anyIf(ua_family, ua_family != '') AS ua_family,
        anyIf(origin, origin != '') AS origin,
        anyIf(p_client, p_client != 0) AS p_client,
        anyIf(s_client, s_client != 0) AS s_client,
        max(minted) = 1 AS was_minted,
        max(used) = 1 AS was_used,
        sum(refused_n) > 0 AS is_stale,
        minIf(first_ok, first_ok > 0) AS first_ok_t,
        max(last_ok) AS last_ok_t,
        sum(ok_n) AS ok_count,
        max(last_t) AS session_last_t,
        max(last_refused) AS last_refused_t,
        argMax(last_ok_flag, last_t) = 0 AND max(used) = 1 AS last_failed
    FROM per_source
    GROUP BY skh
)
SELECT
    s.ua_family AS ua_family,
    s.origin AS origin,
    count() AS sessions,
    countIf(was_minted AND NOT was_used) AS minted_unused,
    countIf(is_stale) AS stale,
    countIf(is_stale AND rk.skh != 0 AND rk.rt >= s.last_refused_t - 2) AS recovered,
    countIf(is_stale AND NOT (rk.skh != 0 AND rk.rt >= s.last_refused_t - 2)) AS unrecovered_stale,
    countIf(last_failed
            AND NOT arrayExists(x -> x >= s.session_last_t AND x <= s.session_last_t + {window_s:Float64}, pi.ts)
            AND NOT arrayExists(x -> x >= s.session_last_t AND x <= s.session_last_t + {window_s:Float64}, si.ts)) AS abandoned_after_failure,
    countIf(ok_count > 0 AND arrayCount(span -> span.1 > s.first_ok_t AND span.2 < s.last_ok_t, x.spans) >= 1) AS survived_1,
    countIf(ok_count > 0 AND arrayCount(span -> span.1 > s.first_ok_t AND span.2 < s.last_ok_t, x.spans) >= 2) AS survived_2
FROM per_session AS s
LEFT JOIN recovered_keys AS rk ON rk.skh = s.session_key
LEFT JOIN proxy_inits AS pi ON pi.clienth = s.p_client
LEFT JOIN server_inits AS si ON si.clienth = s.s_client
CROSS JOIN restarts AS x
GROUP BY ua_family, origin
ORDER BY sessions DESC
