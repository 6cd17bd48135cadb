-- proxy_remint_pairs: re-mints inferred from the proxy (DESIGN §4): a refused miss
-- on session A, then an initialize minting B from the same client (address and
-- user agent: the new initialize usually comes on a new TCP connection) within
-- window_s seconds. Each replacement is credited to one stale session (the latest
-- miss before it). adopted: some later request carried B.
-- requires: proxy_requests
WITH
r AS
(
    SELECT t, sk, rk, client, refused, init, ua_family
    FROM proxy_requests
),
misses AS (SELECT sk AS stale, client, t FROM r WHERE refused AND sk != ''),
inits AS (SELECT rk AS replacement, client, t AS init_t FROM r WHERE init),
candidates AS
(
    SELECT m.stale AS c_stale, argMin(i.replacement, i.init_t) AS c_replacement, min(i.init_t) AS c_init_t,
           argMin(m.t, i.init_t) AS c_miss_t
    FROM misses AS m
    INNER JOIN inits AS i ON i.client = m.client
    WHERE i.init_t >= m.t AND i.init_t <= m.t + {window_s:Float64}
    GROUP BY m.stale
),
pairs AS
(
    SELECT argMax(c_stale, c_miss_t) AS stale, c_replacement AS replacement, min(c_init_t) AS init_t, max(c_miss_t) AS miss_t
    FROM candidates
    GROUP BY c_replacement
),
used AS (SELECT sk, min(t) AS first_used FROM r WHERE sk != '' GROUP BY sk)
SELECT
    p.stale AS stale_session_key,
    p.replacement AS replacement_session_key,
    p.miss_t AS miss_t,
    p.init_t AS init_t,
    CAST(u.sk != '', 'Bool') AS adopted
FROM pairs AS p
LEFT JOIN used AS u ON u.sk = p.replacement
