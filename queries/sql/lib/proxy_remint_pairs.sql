-- proxy_remint_pairs: re-mints inferred from the proxy (DESIGN §4): a refused miss
-- on session A, then an initialize minting B from the same client (address and
-- user agent: the new initialize usually comes on a new TCP connection) within
-- window_s seconds (its end included, to the microsecond: compared as whole
-- microseconds, as in refused_misses.sql). Each replacement is credited to one
-- stale session (the latest miss before it). adopted: some request in the range
-- carried B (at any time: the hourly rollup records no time; a minted key is new,
-- so only a reused or client-chosen id is seen before its initialize). Joined on
-- the hashed keys; only the initializes of refused clients, and the requests
-- carrying a replacement, are read. The misses are the refused lines themselves
-- (the neighbours proxy_refused.sql finds for them are not needed here).
-- requires: proxy_lines, proxy_signal_lines
WITH
-- whether a replacement was used: the hours the range covers whole (bound:
-- queries/registry.ts wholeHours) from the proxy_sessions rollup (0008), the cut
-- hours from the rows; under a service or environment filter every hour from the
-- rows, read with FINAL (a rollup cannot forget a relabelled line's old label)
{whole_hour_lo:UInt32} < {whole_hour_hi:UInt32} AND {service:String} = '' AND {environment:String} = '' AS pairs_rollup,
misses AS (SELECT skh AS stale_h, clienth, t FROM proxy_signal_lines WHERE refused AND skh != 0),
-- one initialize per client and µs (the least key: an ASOF join keeps one of the rows
-- that tie, the one it read first, so two initializes of one client at one µs gave
-- the replacement of whichever batch was written first: a metamorphic pass)
inits AS
(
    SELECT argMin(rk, rkh) AS replacement, min(rkh) AS replacement_h, clienth, t AS init_t
    FROM proxy_signal_lines
    WHERE init AND clienth IN (SELECT clienth FROM misses)
    GROUP BY clienth, t
),
candidates AS
(
    -- per stale session and replacement: the latest of the session's misses that
    -- initialize answered. Every replacement that answered one of its misses, not
    -- only the first: a client that re-initializes and still sends the stale id
    -- (refused again, initializes again) makes a pair each time, and the one after
    -- its last miss is what recovered it (grouped by the stale session alone, only
    -- its first replacement was kept, so a session whose last re-initialize was
    -- adopted read unrecovered, that pair missing and its first replacement
    -- orphaned: found reading this SQL, 2026-12-05)
    SELECT m.stale_h AS c_stale_h, (i.replacement_h, i.replacement) AS c_replacement, i.init_t AS c_init_t, max(m.t) AS c_miss_t
    -- each miss with the client's first initialize at or after it (ASOF: the
    -- earliest replacement in its window, if any, without pairing every miss
    -- with every initialize of a client that holds thousands of sessions)
    FROM misses AS m
    ASOF INNER JOIN inits AS i ON i.clienth = m.clienth AND m.t <= i.init_t
    WHERE round((i.init_t - m.t) * 1e6) <= round({window_s:Float64} * 1e6)
    GROUP BY m.stale_h, i.replacement_h, i.replacement, i.init_t
),
pairs AS
(
    -- (a tie in c_miss_t: the greater key, whatever the order the rows were read in)
    SELECT argMax(c_stale_h, (c_miss_t, c_stale_h)) AS stale_h, c_replacement.1 AS replacement_h, any(c_replacement.2) AS replacement,
           min(c_init_t) AS init_t, max(c_miss_t) AS miss_t
    FROM candidates
    GROUP BY replacement_h
)
SELECT
    p.stale_h AS stale_h,
    p.replacement_h AS replacement_h,
    k.sk AS stale_session_key,
    p.replacement AS replacement_session_key,
    p.miss_t AS miss_t,
    p.init_t AS init_t,
    CAST(u.skh != 0, 'Bool') AS adopted
FROM pairs AS p
-- joined, not filtered by IN (SELECT … FROM pairs): each reference of pairs would
-- compute the candidates again
LEFT JOIN
(
    SELECT DISTINCT skh
    FROM
    (
        SELECT h AS skh FROM proxy_sessions
        WHERE pairs_rollup AND ts >= toDateTime({whole_hour_lo:UInt32}, 'UTC') AND ts < toDateTime({whole_hour_hi:UInt32}, 'UTC')
          AND url_path IN {endpoint_paths:Array(String)} AND used = 1
        UNION ALL
        SELECT skh FROM proxy_lines
        WHERE skh != 0 AND NOT (pairs_rollup AND ts >= {whole_from:DateTime64(6, 'UTC')} AND ts < {whole_to:DateTime64(6, 'UTC')})
    )
) AS u ON u.skh = p.replacement_h
-- the stale sessions' keys (a stale session has a refused miss)
LEFT JOIN (SELECT skh, any(sk) AS sk FROM proxy_signal_lines WHERE refused AND skh != 0 GROUP BY skh) AS k ON k.skh = p.stale_h
