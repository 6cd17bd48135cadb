-- session_continuity: what happened to sessions, by user-agent family and origin,
-- from proxy and server evidence together (a session is its keyed id; both
-- sources hash ids with the same deployment key).
--   minted_unused:       an initialize minted the id, no request ever carried it back
--                        (e.g. a browser client that never returns Mcp-Session-Id)
--   stale:               the session got at least one refused miss
--   recovered:           a stale session that was re-minted by the server (a remint
--                        pair) or whose client re-initialized (an inferred pair)
--   unrecovered_stale:   a stale session never recovered
--   unrecovered_new:     of those, the sessions not refused before the range
--                        began (the canary's deploy window: a session an earlier
--                        restart broke, still resending its id, is not this one's)
--   abandoned_after_failure: the session's last request failed and the same client
--                        sent no initialize within window_s afterwards
--   survived_1/survived_2: sessions with 2xx both before and after at least one / two restarts
--                        (before the earlier and after the later of the restart's down_from and up_at)
-- Every "within window_s" includes its end and is exact to the microsecond: the
-- float seconds are compared as whole microseconds (as in refused_misses.sql).
-- Sessions and clients are joined on their hashed keys (proxy_access and
-- server_requests, schema/migrations/0006-0007). Every per-session fact below is
-- an existence, a minimum or a maximum, so a re-delivered copy of an event changes
-- nothing. Where a session has several clients or user agents, the largest
-- (hashed client, family, origin) is reported.
--
-- Where the facts come from (schema/migrations/0008):
--  * per session: the hours t_from..t_to covers whole come from the rollups
--    proxy_sessions and server_sessions, the hours it cuts from the rows, combined
--    with the same functions, so any range is exact. A line re-imported under
--    another --service keeps its old label in the rollup (a rollup cannot forget),
--    so when a service or environment filter is given the proxy facts come from
--    the rows, read with FINAL (a relabelled line counts under its newest label);
--    without a filter a label changes nothing here. The server's requests are
--    read without FINAL, as before the rollups (a relabelled server event counts
--    under both labels until a merge), so the server rollup serves every case.
--  * the rare rows (proxy refused misses, server refused misses and initializes,
--    re-mints, boots) come from the rows: refused misses and initializes from the
--    signal rows (schema/migrations/0012), both read with FINAL (a relabelled one
--    counts under its newest label only); a refused miss finds its session's
--    previous served request in the rollup's hours, and reads the rows of its hour
--    only when that hour holds served requests both before and after it.
--  * restarts: server boots (their previous boot's activity from server_sessions)
--    and proxy-inferred ones (5xx gaps from proxy_seq; transitions as in
--    proxy_transitions, merged by overlap as in proxy_restarts).
-- requires: proxy_signal_lines, server_signal_rows, proxy_seq, server_boots
WITH
-- the hours read whole from the rollups: [hour_lo, hour_hi), seconds
intDiv(greatest(toUnixTimestamp64Micro({t_from:DateTime64(6, 'UTC')}), 0) + 3599999999, 3600000000) * 3600 AS hour_lo,
least(intDiv(greatest(toUnixTimestamp64Micro({t_to:DateTime64(6, 'UTC')}), 0), 3600000000) * 3600, 4294965600) AS hour_hi,
hour_lo < hour_hi AS whole_hours,
whole_hours AND {service:String} = '' AND {environment:String} = '' AS proxy_rollup,
fromUnixTimestamp64Micro(hour_lo * 1000000) AS whole_from,
fromUnixTimestamp64Micro(hour_hi * 1000000) AS whole_to,
-- the proxy's session lines (a request session key, or an initialize) that the
-- rollup does not cover: the cut hours, or every hour under a filter
raw_lines AS
(
    SELECT toStartOfHour(ts) AS hour, t, skh, rkh, clienth, ua_family, origin, ok, refused, init, pg
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
    SELECT toString(boot_id) AS boot_id, t, skh, mkh, clienth, toString(ua_family) AS ua_family, event_type, http_status, ok, refused, init
    FROM srv
    WHERE NOT (whole_hours AND ts >= whole_from AND ts < whole_to)
),
-- the proxy's refused misses on a session, read once (FINAL: under the newest
-- label) from the signal rows (proxy_signal_lines.sql)
(
    SELECT groupArray((service, skh, clienth, t, toStartOfHour(ts)))
    FROM proxy_signal_lines
    WHERE refused AND skh != 0
) AS refused_rows,
refused AS
(
    SELECT x.1 AS service, x.2 AS skh, x.3 AS clienth, x.4 AS t, x.5 AS hour FROM (SELECT arrayJoin(refused_rows) AS x)
),
-- the proxy's initializes: (minted key, client, t), read once
(
    SELECT groupArray((h, x.1, x.2))
    FROM
    (
        SELECT h, arrayJoin(inits) AS x
        FROM proxy_sessions
        WHERE proxy_rollup AND ts >= toDateTime(hour_lo, 'UTC') AND ts < toDateTime(hour_hi, 'UTC')
          AND url_path IN {endpoint_paths:Array(String)} AND minted = 1
        UNION ALL
        SELECT rkh AS h, (clienth, t) AS x FROM raw_lines WHERE init
    )
) AS init_rows,
proxy_inits_all AS (SELECT x.1 AS h, x.2 AS clienth, x.3 AS t FROM (SELECT arrayJoin(init_rows) AS x)),
-- the server's initializes, read once
(
    SELECT groupArray((clienth, t)) FROM server_signal_rows WHERE init
) AS server_init_rows,
-- one row per initialize: readers find a client's first one after a time with
-- an ASOF join (a client may hold thousands of sessions: no per-client arrays)
server_inits AS (SELECT x.1 AS clienth, x.2 AS t, toUInt8(1) AS hit FROM (SELECT arrayJoin(server_init_rows) AS x)),
-- each refused miss's previous upstream-served request of its session (prev:
-- (t, ok); (0, 0) = none): the session's other refused misses, and its other
-- answered requests by the hour: an earlier hour's latest, or its own hour's
-- when every one of that hour is earlier; the rows of its hour are read only
-- when that hour has answered requests both before and after it (straddle)
session_hours AS
(
    SELECT hour, h, min(first_served) AS fs, max(last_served) AS ls
    FROM
    (
        SELECT ts AS hour, ps.h AS h, first_served, last_served
        FROM proxy_sessions AS ps
        INNER JOIN (SELECT DISTINCT skh AS h FROM refused) AS rs ON rs.h = ps.h
        WHERE proxy_rollup AND ts >= toDateTime(hour_lo, 'UTC') AND ts < toDateTime(hour_hi, 'UTC')
          AND url_path IN {endpoint_paths:Array(String)} AND used = 1
        UNION ALL
        SELECT hour, skh AS h, if(NOT pg AND NOT refused, t, inf), if(NOT pg AND NOT refused, (t, toUInt8(ok)), (0., toUInt8(0)))
        FROM raw_lines AS l
        INNER JOIN (SELECT DISTINCT skh AS h FROM refused) AS rs ON rs.h = l.skh
    )
    GROUP BY hour, h
),
-- each refused miss's previous refused miss on its session (answered, not a 2xx;
-- strictly earlier, 0 = none), from the session's distinct miss times in order:
-- a client that resends a dead id thousands of times costs its misses, not their
-- square (as pairing every miss with every other did)
miss_prev AS
(
    SELECT skh, x.1 AS t, x.2 AS prev_t
    FROM
    (
        SELECT skh, arrayJoin(arrayZip(ts, arrayPopBack(arrayPushFront(ts, 0.)))) AS x
        FROM (SELECT skh, arraySort(groupUniqArray(t)) AS ts FROM refused GROUP BY skh)
    )
),
(
    SELECT groupArray((service, skh, t, hour, if(by_hour > by_miss, by_hour, by_miss), straddle))
    FROM
    (
        SELECT r.service AS service, r.skh AS skh, r.t AS t, r.hour AS hour,
               max(if(c.hour < r.hour OR (c.hour = r.hour AND c.ls.1 < r.t), c.ls, (0., toUInt8(0)))) AS by_hour,
               (any(mp.prev_t), toUInt8(0)) AS by_miss,
               max(c.hour = r.hour AND c.fs <= r.t AND c.ls.1 >= r.t) AS straddle
        FROM refused AS r
        LEFT JOIN session_hours AS c ON c.h = r.skh
        LEFT JOIN miss_prev AS mp ON mp.skh = r.skh AND mp.t = r.t
        GROUP BY service, skh, t, hour
    )
) AS prev_rows,
prev_all AS
(
    SELECT x.1 AS service, x.2 AS skh, x.3 AS t, x.4 AS hour, x.5 AS before, x.6 AS straddle FROM (SELECT arrayJoin(prev_rows) AS x)
),
straddled AS (SELECT skh, t, hour FROM prev_all WHERE straddle),
straddle_prev AS
(
    SELECT s.skh AS skh, s.t AS t, max(if(l.t < s.t AND NOT l.pg, (l.t, toUInt8(l.ok)), (0., toUInt8(0)))) AS before_in_hour
    FROM straddled AS s
    INNER JOIN
    (
        SELECT toStartOfHour(ts) AS hour, skh, t, ok, pg
        FROM proxy_lines
        -- one set of (hour, session) pairs: the engine analyzes prev_rows' whole
        -- subquery again at each reference of `straddled`, and the hour still
        -- selects by the sort key (an empty set reads nothing)
        WHERE (toStartOfHour(ts), skh) IN (SELECT hour, skh FROM straddled)
    ) AS l ON l.skh = s.skh AND l.hour = s.hour
    GROUP BY s.skh, s.t
),
-- transitions (proxy_transitions.sql): the previous served request was a 2xx
(
    SELECT groupArray((service, skh, prev.1, t))
    FROM
    (
        SELECT p.service AS service, p.skh AS skh, p.t AS t,
               if(p.straddle AND sp.before_in_hour > p.before, sp.before_in_hour, p.before) AS prev
        FROM prev_all AS p
        LEFT JOIN straddle_prev AS sp ON sp.skh = p.skh AND sp.t = p.t
    )
    WHERE prev.2 = 1
) AS transition_rows,
-- the 5xx gaps, read once
(SELECT groupArray((service, t, run, last_served, next_served)) FROM proxy_seq) AS seq_rows,
seq AS (SELECT x.1 AS service, x.2 AS t, x.3 AS run, x.4 AS last_served, x.5 AS next_served FROM (SELECT arrayJoin(seq_rows) AS x)),
trans AS
(
    -- matched: a gap of the same service lies between the two requests
    SELECT service, lo, hi, gap.1 > lo AS matched
    FROM
    (
        SELECT service, t AS hi, lo, is_gap,
               max(if(is_gap = 1, (t, run), (0., 0.))) OVER (PARTITION BY service ORDER BY t, is_gap ROWS UNBOUNDED PRECEDING) AS gap
        FROM
        (
            SELECT x.1 AS service, x.4 AS t, x.3 AS lo, toUInt8(0) AS is_gap, 0. AS run FROM (SELECT arrayJoin(transition_rows) AS x)
            UNION ALL
            SELECT service, t, 0. AS lo, toUInt8(1) AS is_gap, run FROM seq
        )
    )
    WHERE is_gap = 0
),
proxy_spans AS
(
    -- gaps (proxy_restarts.sql): down from the last served request before the run,
    -- up at the first after it
    SELECT if(min(last_served) = 0, min(t), min(last_served)) AS lo,
           if(max(next_served) >= 1e12, lo, max(next_served)) AS hi
    FROM seq
    GROUP BY service, run
    UNION ALL
    -- transitions that span no gap, merged by overlap: each group is one restart
    SELECT max(lo) AS lo, min(hi) AS hi
    FROM
    (
        SELECT service, lo, hi, sum(toUInt64(is_new)) OVER (PARTITION BY service ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS cluster
        FROM
        (
            SELECT service, lo, hi,
                   lo > max(hi) OVER (PARTITION BY service ORDER BY lo, hi ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS is_new
            FROM trans
            WHERE NOT matched
        )
    )
    GROUP BY service, cluster
),
-- server boots (server_boots.sql): each boot that follows an earlier one of its
-- service, down from the previous boot's shutdown, else its last 2xx settlement,
-- else its last event
server_restarts AS (SELECT down_from AS lo, boot_t AS hi FROM server_boots WHERE is_restart),
(SELECT groupArray((lo, hi)) FROM server_restarts) AS server_spans,
restarts AS
(
    -- server restarts, plus proxy-inferred ones that bracket no server boot; each
    -- span from the earlier to the later of its ends: where the old and new instances
    -- overlapped (down_from after the boot), a session crossed only if served before
    -- the new boot and after the old instance's end
    SELECT arrayMap(sp -> (least(sp.1, sp.2), greatest(sp.1, sp.2)), arrayConcat(server_spans, groupArray((p.lo, p.hi)))) AS spans
    FROM proxy_spans AS p
    WHERE NOT arrayExists(b -> b.2 >= p.lo - 1 AND b.2 <= p.hi + 1, server_spans)
),
-- recoveries of a stale session and when they happened: server re-mints, inferred
-- pairs (the re-initialize), and refused misses the same client answered with an
-- initialize; a stale session is recovered only by one at or after its last refused
-- miss (2 s of clock slack), not by an earlier one
remint_candidates AS
(
    -- inferred re-mints (proxy_remint_pairs.sql): a refused miss, then an initialize
    -- from the same client within window_s; each replacement credited to the
    -- latest miss before it
    SELECT m.skh AS c_stale_h, argMin(i.h, i.t) AS c_replacement_h, min(i.t) AS c_init_t, argMin(m.t, (i.t, -m.t)) AS c_miss_t
    FROM refused AS m
    ASOF INNER JOIN proxy_inits_all AS i ON i.clienth = m.clienth AND m.t <= i.t
    WHERE round((i.t - m.t) * 1e6) <= round({window_s:Float64} * 1e6)
    GROUP BY m.skh
),
(
    SELECT groupArray((skh, t, arh, clienth)) FROM server_signal_rows WHERE refused
) AS server_refused_array,
server_refused_rows AS
(
    SELECT x.1 AS skh, x.2 AS t, x.3 AS arh, x.4 AS clienth FROM (SELECT arrayJoin(server_refused_array) AS x)
),
server_reinit AS
(
    -- server_refused.sql's next = 'initialize': the client (of the refused
    -- arrival, else of the refused miss) initialized within window_s after it
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
        SELECT reinterpretAsUInt128(sipHash128(stale_session_key)) AS skh, toUnixTimestamp64Micro(ts) / 1e6 AS rt FROM events
        WHERE event_type = 'remint' AND outcome != 'failed' AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
        UNION ALL
        SELECT argMax(c_stale_h, c_miss_t) AS skh, min(c_init_t) AS rt FROM remint_candidates GROUP BY c_replacement_h
        UNION ALL
        SELECT skh, t AS rt FROM server_reinit
    )
    GROUP BY skh
),
per_source AS
(
    -- one row per session and source: last_t is the source's latest request,
    -- failed whether it failed (server: the latest settlement or refused miss;
    -- ties between requests go to the failure), first_ok 0 = none
    SELECT h, client AS p_client, toUInt128(0) AS s_client, ua_family, origin, used, minted,
           if(isInfinite(first_ok), 0., first_ok) AS first_ok, last_ok, last.1 AS last_t, last.2 AS failed, last_refused
    FROM
    (
        SELECT h, max(client) AS client, max(ua_family) AS ua_family, max(origin) AS origin, max(used) AS used, max(minted) AS minted,
               min(first_ok) AS first_ok, max(last_ok) AS last_ok, max(last) AS last, max(last_refused) AS last_refused
        FROM
        (
            SELECT h, client, ua_family, origin, used, minted, first_ok, last_ok, last, last_refused
            FROM proxy_sessions
            WHERE proxy_rollup AND ts >= toDateTime(hour_lo, 'UTC') AND ts < toDateTime(hour_hi, 'UTC')
              AND url_path IN {endpoint_paths:Array(String)}
            UNION ALL
            SELECT if(skh != 0, skh, rkh) AS h, clienth, toString(ua_family), toString(origin), toUInt8(skh != 0), toUInt8(init),
                   if(skh != 0 AND ok, t, inf), if(skh != 0 AND ok, t, 0.), if(skh != 0, (t, toUInt8(NOT ok)), (0., toUInt8(0))),
                   if(skh != 0 AND refused, t, 0.)
            FROM raw_lines
        )
        GROUP BY h
    )
    UNION ALL
    SELECT h, toUInt128(0) AS p_client, client AS s_client, ua_family, '' AS origin, used, minted,
           if(isInfinite(first_ok), 0., first_ok) AS first_ok, last_ok, last_t,
           -- no settlement or refused miss: not a success
           if(last.1 = 0, toUInt8(1), last.2) AS failed, last_refused
    FROM
    (
        SELECT h, max(client) AS client, max(ua_family) AS ua_family, max(used) AS used, max(minted) AS minted,
               min(first_ok) AS first_ok, max(last_ok) AS last_ok, max(last_t) AS last_t, max(last) AS last, max(last_refused) AS last_refused
        FROM
        (
            SELECT h, client, ua_family, used, minted, first_ok, last_ok, last_t, last, last_refused
            FROM server_sessions
            WHERE whole_hours AND ts >= toDateTime(hour_lo, 'UTC') AND ts < toDateTime(hour_hi, 'UTC')
              AND ({service:String} = '' OR service = {service:String})
              AND ({environment:String} = '' OR environment = {environment:String})
              AND h != 0
            UNION ALL
            SELECT k.1 AS h, if(k.2 = 1 OR NOT init, clienth, toUInt128(0)), if(k.2 = 1 OR NOT init, ua_family, ''),
                   toUInt8(k.2 = 0 AND NOT init), toUInt8(k.2 = 1),
                   if(k.2 = 0 AND ok, t, inf), if(k.2 = 0 AND ok, t, 0.), if(k.2 = 0 AND NOT init, t, 0.),
                   if(k.2 = 0 AND event_type != 'arrival', (t, toUInt8(NOT ok)), (0., toUInt8(0))), if(k.2 = 0 AND refused, t, 0.)
            FROM raw_srv
            ARRAY JOIN [(skh, toUInt8(0)), (mkh, toUInt8(1))] AS k
            WHERE k.1 != 0 AND (k.2 = 0 OR event_type = 'settlement')
        )
        GROUP BY h
    )
    WHERE used = 1 OR minted = 1
),
per_session AS
(
    SELECT
        h AS session_key,
        max(ua_family) AS ua_family,
        max(origin) AS origin,
        max(p_client) AS p_client,
        max(s_client) AS s_client,
        max(minted) = 1 AS was_minted,
        max(used) = 1 AS was_used,
        max(last_refused) > 0 AS is_stale,
        minIf(first_ok, first_ok > 0) AS first_ok_t,
        max(last_ok) AS last_ok_t,
        max(last_t) AS session_last_t,
        max(last_refused) AS last_refused_t,
        -- the latest request of either source; a request one source saw fail
        -- (a 2xx carrying a tool error) failed
        max((last_t, failed)).2 = 1 AND max(used) = 1 AS last_failed
    FROM per_source
    GROUP BY h
),
-- the range's stale sessions that were refused before it began: the hourly
-- rollups for the hours before t_from's hour, the rows for the part of that hour
-- before t_from (from_hour: the start of t_from's hour, s; 0 before 1970, which the
-- rollups' DateTime cannot hold)
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
    ) AS b
    INNER JOIN (SELECT session_key FROM per_session WHERE is_stale) AS st ON st.session_key = b.h
)
SELECT
    s.ua_family AS ua_family,
    s.origin AS origin,
    count() AS sessions,
    countIf(was_minted AND NOT was_used) AS minted_unused,
    countIf(is_stale) AS stale,
    countIf(is_stale AND rk.skh != 0 AND rk.rt >= s.last_refused_t - 2) AS recovered,
    countIf(is_stale AND NOT (rk.skh != 0 AND rk.rt >= s.last_refused_t - 2)) AS unrecovered_stale,
    countIf(is_stale AND NOT (rk.skh != 0 AND rk.rt >= s.last_refused_t - 2) AND sb.h = 0) AS unrecovered_new,
    countIf(last_failed
            AND NOT (pi.hit = 1 AND round((pi.t - s.session_last_t) * 1e6) <= round({window_s:Float64} * 1e6))
            AND NOT (si.hit = 1 AND round((si.t - s.session_last_t) * 1e6) <= round({window_s:Float64} * 1e6))) AS abandoned_after_failure,
    countIf(last_ok_t > 0 AND arrayCount(span -> span.1 > s.first_ok_t AND span.2 < s.last_ok_t, x.spans) >= 1) AS survived_1,
    countIf(last_ok_t > 0 AND arrayCount(span -> span.1 > s.first_ok_t AND span.2 < s.last_ok_t, x.spans) >= 2) AS survived_2
FROM per_session AS s
LEFT JOIN recovered_keys AS rk ON rk.skh = s.session_key
LEFT JOIN stale_before AS sb ON sb.h = s.session_key
-- the client's first initialize at or after the session's last request (ASOF)
ASOF LEFT JOIN (SELECT clienth, t, toUInt8(1) AS hit FROM proxy_inits_all) AS pi ON pi.clienth = s.p_client AND s.session_last_t <= pi.t
ASOF LEFT JOIN server_inits AS si ON si.clienth = s.s_client AND s.session_last_t <= si.t
CROSS JOIN restarts AS x
GROUP BY ua_family, origin
ORDER BY sessions DESC
