-- proxy_refused: the refused misses the proxy logged on a session (DESIGN §4), each
-- with its session's requests around it:
--   prev_t, prev_ok  the session's previous upstream-served request (not a
--                    proxy-generated 5xx) and whether it was a 2xx (0, 0 = none)
--   had_ok           some earlier request of the session was a 2xx, also before
--                    the range (the rollup proxy_sessions: an hour that starts
--                    before t_from and whose first 2xx is before it), so a
--                    miss's reason does not depend on where the range starts
--   next_t           the session's next request of any kind (0 = none)
-- Sessions and clients are their hashed keys (skh, clienth; the strings would be
-- read for every line). Two scalars, which the engine computes once per query
-- wherever the same expression appears: the refused misses, and the requests of their sessions
-- (time-sorted per session); no join
-- or window runs over every request.
-- requires: proxy_lines
WITH
(
    SELECT groupArray((service, skh, t, clienth, http_method, http_status))
    FROM proxy_lines WHERE refused AND skh != 0
) AS refused_rows,
(
    SELECT groupArray((skh, rows))
    FROM
    (
        -- only the refused sessions' lines, joined to their keys (a join, not an IN:
        -- a scalar that holds a subquery set is evaluated again at every reference)
        SELECT l.skh AS skh, arraySort(groupArray((l.t, l.ok, l.pg))) AS rows
        FROM proxy_lines AS l
        INNER JOIN (SELECT DISTINCT arrayJoin(refused_rows).2 AS skh) AS r ON r.skh = l.skh
        GROUP BY l.skh
    )
) AS session_rows,
(
    SELECT groupUniqArray(ps.h)
    FROM proxy_sessions AS ps
    INNER JOIN (SELECT DISTINCT arrayJoin(refused_rows).2 AS h) AS r ON r.h = ps.h
    WHERE ps.ts < {t_from:DateTime64(6, 'UTC')}
      AND ps.first_ok < toUnixTimestamp64Micro({t_from:DateTime64(6, 'UTC')}) / 1e6
      AND ({service:String} = '' OR ps.service = {service:String})
      AND ({environment:String} = '' OR ps.environment = {environment:String})
      AND ps.url_path IN {endpoint_paths:Array(String)}
) AS ok_before_range
SELECT m.x.1 AS service, m.x.2 AS skh, m.x.3 AS t, m.x.4 AS clienth, m.x.5 AS http_method, m.x.6 AS http_status,
       arrayLast(y -> y.1 < t AND NOT y.3, s.y.2) AS prev,
       prev.1 AS prev_t, prev.2 AS prev_ok,
       arrayExists(y -> y.1 < t AND y.2, s.y.2) OR has(ok_before_range, skh) AS had_ok,
       arrayFirst(y -> y.1 > t, s.y.2).1 AS next_t
FROM (SELECT arrayJoin(refused_rows) AS x) AS m
INNER JOIN (SELECT arrayJoin(session_rows) AS y) AS s ON s.y.1 = m.x.2
