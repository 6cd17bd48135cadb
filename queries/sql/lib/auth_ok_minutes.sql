-- auth_ok_minutes: the 2xx auth_challenges judges the challenges by, as (k64, v):
-- k64 a client's or session's key (auth_challenges.sql's key64), v its 2xx's µs << 1
-- (a 2xx; a challenge is v | 1, added by the query), only of the sources and scope
-- the query counts. Read by the minute where that gives the same answer, from the
-- rows elsewhere (below); auth_ok_rows.sql reads the rows alone, and runQuery reads
-- that instead where the minutes do not pay (queries/registry.ts authOkForm).
-- Reads the query's challenges, challenge_sources and key64.
-- requires: proxy_lines
WITH
-- The 2xx around the challenges come by the minute where they can (ok_minutes,
-- schema/migrations/0017: each key's first and last 2xx of each minute), from the
-- rows elsewhere. A minute's first and last 2xx give the same answers as all of
-- them (the migration says why) to every question below but one, so the minutes
-- are read where the window is at least 60 s (minute_rows) and the range covers
-- the minute whole: the minutes the range cuts come from the rows. The question
-- they cannot answer is whether a client had a 2xx between its first and last
-- challenge when both lie in one minute with 2xx before and after them (a loop
-- within a minute); such a client's rows of that minute are read too (burst_rows).
-- Where a minute's row cannot be told apart by the query's scope, the rows are
-- read: the clients' labels there can be stale (a line or request delivered again
-- under another label keeps its old one in ok_minutes, while the rows keep the
-- newest copy: proxy_lines reads with FINAL, and server_requests drops the older
-- copy when it merges), and a session's minutes hold both sources without labels or
-- paths, so under a service or environment filter all come from the rows, and a
-- session's also when mcp_paths is given. (The server clients' minutes were read
-- under a filter too, until a break-it pass relabelled a request and merged.)
{auth_window_s:Float64} >= 60 AND {whole_minute_lo:UInt32} < {whole_minute_hi:UInt32} AS minute_rows,
minute_rows AND {service:String} = '' AND {environment:String} = '' AS client_minute_rows,
client_minute_rows AND empty({mcp_paths:Array(String)}) AS session_minute_rows,
{whole_minute_from:DateTime64(6, 'UTC')} AS minute_from,
{whole_minute_to:DateTime64(6, 'UTC')} AS minute_to,
-- the clients whose loop question the minutes cannot answer: at least loop_min
-- challenges, the first and last in the same minute (m, minutes since the epoch)
(
    SELECT groupArray((client_k64, m))
    FROM (SELECT client_k64, intDiv(min(us), 60000000) AS m FROM challenges
          GROUP BY client_k64 HAVING count() >= {loop_min:UInt32} AND m = intDiv(max(us), 60000000))
) AS bursts,
-- their minutes' span, as bound times (empty without bursts)
fromUnixTimestamp64Micro(toInt64(if(empty(bursts), 0, arrayMin(arrayMap(b -> b.2, bursts)) * 60000000)), 'UTC') AS burst_from,
fromUnixTimestamp64Micro(toInt64(if(empty(bursts), 0, (arrayMax(arrayMap(b -> b.2, bursts)) + 1) * 60000000)), 'UTC') AS burst_to,
-- the 2xx read from the rows: as a client's (as_client) where the minutes do not
-- serve its client, as a session's (as_session) where they do not serve its session
ok_rows AS
(
    SELECT toUInt8(0) AS is_server, clienth, skh, toUInt64(toUnixTimestamp64Micro(ts)) AS us,
           NOT (client_minute_rows AND ts >= minute_from AND ts < minute_to) AS as_client,
           skh != 0 AND NOT (session_minute_rows AND ts >= minute_from AND ts < minute_to) AS as_session
    FROM proxy_lines
    WHERE ok AND (as_client OR as_session)
    UNION ALL
    SELECT toUInt8(1) AS is_server, clienth, skh, toUInt64(toUnixTimestamp64Micro(ts)) AS us,
           NOT (client_minute_rows AND ts >= minute_from AND ts < minute_to) AS as_client,
           skh != 0 AND NOT (session_minute_rows AND ts >= minute_from AND ts < minute_to) AS as_session
    FROM server_requests
    WHERE ok AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
      AND (as_client OR as_session)
),
-- the loop-within-a-minute clients' 2xx of that minute, from the rows (a 2xx also
-- read above or from the minutes changes nothing: every question is an existence,
-- a first or a last)
burst_rows AS
(
    SELECT key64(clienth, 2) AS k64, toUInt64(toUnixTimestamp64Micro(ts)) AS us FROM proxy_lines
    WHERE ok AND client_minute_rows AND ts >= burst_from AND ts < burst_to AND has(bursts, (k64, intDiv(us, 60000000)))
    UNION ALL
    SELECT key64(clienth, 3) AS k64, toUInt64(toUnixTimestamp64Micro(ts)) AS us FROM server_requests
    -- (client_minute_rows: no service or environment filter to apply)
    WHERE ok AND client_minute_rows AND ts >= burst_from AND ts < burst_to
      AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
      AND has(bursts, (k64, intDiv(us, 60000000)))
)
SELECT k64, v
FROM
(
        SELECT key64(o.clienth, 2 + o.is_server) AS k64, bitShiftLeft(o.us, 1) AS v
        FROM ok_rows AS o
        WHERE o.as_client
        -- a client's 2xx only of the sources whose challenges are counted: a client
        -- key is looked up only by a challenge of its own source (is_server is in the
        -- key), so where every counted challenge is a server's (a server recorded
        -- each request the proxy logged), the proxy clients' 2xx are not grouped
        -- (10M events: 3M fewer values, 1,072 -> 986 ms, the same rows)
          AND has(challenge_sources, o.is_server)
        UNION ALL
        SELECT key64(o.skh, 4), bitShiftLeft(o.us, 1)
        FROM ok_rows AS o WHERE o.as_session
        UNION ALL
        -- the whole minutes' first and last 2xx (kinds: 0017), of the same sources
        -- and scope as the rows
        SELECT k, bitShiftLeft(arrayJoin(if(lo = hi, [lo], [lo, hi])), 1)
        FROM ok_minutes
        WHERE client_minute_rows AND ts >= toDateTime({whole_minute_lo:UInt32}, 'UTC') AND ts < toDateTime({whole_minute_hi:UInt32}, 'UTC')
          -- (the same bounds on the sorting key's hour: without them the engine read every
          -- granule of the day, 425 against 24 for an hour of the bench store, and the
          -- canary's 15-minute window took 509 against 291 ms from the rows)
          AND toStartOfHour(ts) >= toStartOfHour(toDateTime({whole_minute_lo:UInt32}, 'UTC'))
          AND toStartOfHour(ts) <= toStartOfHour(toDateTime({whole_minute_hi:UInt32} - 60, 'UTC'))
          -- (a row of a 2xx dated after 2106-02-07, which the contract accepted before
          -- it stopped at the last second a DateTime holds, sits at a wrapped minute
          -- decades earlier: its own µs are outside the range)
          AND lo >= toUInt64({whole_minute_lo:UInt32}) * 1000000 AND hi < toUInt64({whole_minute_hi:UInt32}) * 1000000
          AND ((kind = 3 AND has(challenge_sources, 1))
               OR (kind = 2 AND has(challenge_sources, 0)
                 AND url_path IN {endpoint_paths:Array(String)})
               OR (kind = 4 AND session_minute_rows))
        UNION ALL
        SELECT k64, bitShiftLeft(us, 1) FROM burst_rows
)
