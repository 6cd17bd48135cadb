-- server_refused: refused misses the servers recorded, with the arrival's methods
-- and what the same session (or, for an initialize, the same client: user agent
-- and principal) did next within window_s: initialize (the client initialized
-- again within window_s), same_session_again (the session's id arrived again
-- later), nothing. window_s includes its end, to the microsecond (compared as
-- whole microseconds, as in refused_misses.sql). active: the session had a
-- successful request in the range before the miss. Read from server_requests
-- (schema/migrations/0007), joined on its hashed ids. The refused misses and
-- their own arrivals are read once each (scalars; a miss's client is its own user
-- agent and principal, else, where it lacks either, its arrival's: the collector
-- stamps both with the request's, another producer may not); of the other arrivals only
-- the last one of each refused session and the initializes of the refused
-- clients are read, each joined to the refused keys rather than filtered by an
-- IN: with no subquery set in it, a scalar over this fragment (refused_misses
-- reads it twice) is evaluated once. Max and existence do not change with a
-- duplicate, so only the refused misses are deduplicated. The refused misses and
-- the initializes come from the signal rows (server_signal_rows.sql).
-- requires: server_signal_rows
WITH
-- the hours the range covers whole, [refused_hour_lo, refused_hour_hi) in seconds
-- (bound: queries/registry.ts wholeHours, as session_facts.sql reads its rollups),
-- read from the rollup only without a
-- service or environment filter: a rollup cannot forget, so an arrival re-imported
-- under another label stays under its old one there, while the rows keep only the
-- newest copy once the parts merge
{whole_hour_lo:UInt32} AS refused_hour_lo,
{whole_hour_hi:UInt32} AS refused_hour_hi,
refused_hour_lo < refused_hour_hi AND {service:String} = '' AND {environment:String} = '' AS refused_whole_hours,
-- the server's requests in the range and scope (inlined where read: each reader's
-- filter and columns reach the scan)
srv AS
(
    SELECT * FROM server_requests
    WHERE ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
),
(
    SELECT groupArray((service, toString(boot_id), session_key, skh, toString(reason), http_status, t, arh, clienth, own_client))
    FROM
    (
        -- FINAL keeps one copy per (ts, event_id); a copy of an event stamped with
        -- another time is dropped here (the misses are counted): the earliest one is
        -- kept, whatever the read order (without the ORDER BY the copy kept depended
        -- on the plan, and the check proxy_misses_alone, which must match a proxy
        -- miss against the same server misses, keeps the same one)
        SELECT event_id, service, boot_id, session_key, skh, reason, http_status, t, arh, clienth, own_client
        FROM server_signal_rows
        WHERE refused
        ORDER BY event_id, ts
        LIMIT 1 BY event_id
    )
) AS refused_rows,
(
    SELECT groupArray((arh, http_method, mcp_method, clienth))
    FROM
    (
        SELECT a.arh AS arh, toString(a.http_method) AS http_method, toString(a.mcp_method) AS mcp_method, a.clienth AS clienth
        FROM srv AS a
        INNER JOIN (SELECT DISTINCT arrayJoin(refused_rows).8 AS arh) AS r ON r.arh = a.arh
        WHERE a.event_type = 'arrival'
        -- one row per arrival: a copy delivered again in another batch (not merged
        -- yet) would count its miss twice (found by a break-it pass: the misses halved
        -- once the copies merged); the first by (ts, event_id), so an arrival_id
        -- recorded twice with two methods gives one answer whatever batch was written
        -- first (a metamorphic pass)
        ORDER BY a.arh, a.ts, a.event_id
        LIMIT 1 BY arh
    )
) AS refused_arrival_rows,
judged AS
(
    SELECT x.1 AS service, x.2 AS boot_id, x.3 AS sk, x.4 AS skh, x.5 AS reason, x.6 AS http_status, x.7 AS t,
           a.2 AS http_method, a.3 AS mcp_method,
           if(x.10 OR a.1 = 0, x.9, a.4) AS clienth
    FROM (SELECT arrayJoin(refused_rows) AS x) AS r
    LEFT JOIN (SELECT arrayJoin(refused_arrival_rows) AS a) AS ra ON ra.a.1 = r.x.8 AND r.x.8 != 0
),
-- each refused session's latest arrival, and its first successful request (a
-- settlement with outcome ok on the session's id; inf: none), in one read: the whole
-- hours from the rollup (server_sessions.last_arrival and first_ok,
-- schema/migrations/0008, 0013), the hours the range cuts from the rows (bounds on
-- the rows' DateTime64 key are DateTime64: see test/queries-datetime-bounds.test.ts).
-- A miss after the first success is on a session the range's boot served (`active`);
-- one before it, or on a session with none, is on a session already stale when the
-- range began (a client resending a dead id across restarts: its misses were counted
-- against every later deploy; a break-it pass).
session_span AS
(
    SELECT a.h AS skh, max(a.last_t) AS last_t, min(a.first_ok_t) AS first_ok_t
    FROM
    (
        SELECT h, last_arrival AS last_t, first_ok AS first_ok_t FROM server_sessions
        WHERE refused_whole_hours AND ts >= toDateTime(refused_hour_lo, 'UTC') AND ts < toDateTime(refused_hour_hi, 'UTC')
          AND (last_arrival > 0 OR first_ok < inf)
        UNION ALL
        SELECT skh AS h, if(event_type = 'arrival', t, 0.) AS last_t, if(event_type = 'settlement' AND ok, t, inf) AS first_ok_t FROM srv
        WHERE event_type IN ('arrival', 'settlement')
          AND NOT (refused_whole_hours AND ts >= {whole_from:DateTime64(6, 'UTC')}
                   AND ts < {whole_to:DateTime64(6, 'UTC')})
    ) AS a
    INNER JOIN (SELECT DISTINCT arrayJoin(refused_rows).4 AS skh) AS r ON r.skh = a.h
    GROUP BY a.h
),
-- the refused clients' initializes, one row each: a miss finds the first one
-- after it (ASOF), so a client with thousands of sessions costs its rows, not
-- its misses times its initializes
client_inits AS
(
    SELECT a.clienth AS clienth, a.t AS t, toUInt8(1) AS hit
    FROM server_signal_rows AS a
    INNER JOIN (SELECT DISTINCT clienth FROM judged) AS j ON j.clienth = a.clienth
    WHERE a.init
)
SELECT
    j.service AS service, j.boot_id AS boot_id, j.sk AS sk, j.skh AS skh, j.reason AS reason, j.http_status AS http_status, j.t AS t,
    j.http_method AS http_method, j.mcp_method AS mcp_method,
    multiIf(
        ci.hit = 1 AND round((ci.t - j.t) * 1e6) <= round({window_s:Float64} * 1e6), 'initialize',
        ss.last_t > j.t, 'same_session_again',
        'nothing') AS next,
    ss.skh = j.skh AND ss.first_ok_t < j.t AS active
FROM judged AS j
LEFT JOIN session_span AS ss ON ss.skh = j.skh
ASOF LEFT JOIN client_inits AS ci ON ci.clienth = j.clienth AND j.t < ci.t
