-- Proxy-only inference (DESIGN §4), as parameterized views so that every named
-- query shares one definition. Times are seconds since the epoch as Float64
-- (`t`) so that windows are plain arithmetic. All views take the same leading
-- parameters: t_from, t_to (DateTime64(6), UTC, half-open), service and
-- environment ('' = all), mcp_paths (Array(String); empty = inferred).

-- Requests to the MCP endpoint as the proxy saw them. The endpoint is every path
-- on which some request carried Mcp-Session-Id or Mcp-Protocol-Version or some
-- response minted a session, unless mcp_paths names the paths. Discovery probes
-- (/.well-known/*, /register) are never the endpoint.
--   pg:      the proxy produced the 5xx itself (upstream unreachable)
--   ok:      a 2xx the upstream produced
--   refused: a refused miss — a 404, or a 400 that carried a session id
--   init:    an initialize: a POST without a session id answered 2xx with a minted one
CREATE VIEW IF NOT EXISTS proxy_requests AS
WITH endpoints AS
(
    SELECT DISTINCT url_path
    FROM events
    WHERE event_type = 'proxy_access'
      AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
      AND (request_session_key != '' OR response_session_key != '' OR protocol_version != '')
)
SELECT
    ts,
    toUnixTimestamp64Micro(ts) / 1e6 AS t,
    service,
    environment,
    http_method,
    url_path,
    http_status,
    duration_ms,
    request_session_key AS sk,
    response_session_key AS rk,
    principal_key,
    has_credential,
    proxy_generated,
    upstream_error,
    client_address,
    user_agent,
    splitByChar('/', user_agent)[1] AS ua_family,
    attrs['http.origin'] AS origin,
    concat(client_address, ' ', user_agent) AS client,
    (proxy_generated AND http_status >= 500) AS pg,
    (NOT pg AND http_status BETWEEN 200 AND 299) AS ok,
    (NOT pg AND (http_status = 404 OR (http_status = 400 AND sk != ''))) AS refused,
    (ok AND http_method = 'POST' AND sk = '' AND rk != '') AS init
FROM events FINAL
WHERE event_type = 'proxy_access'
  AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
  AND ({service:String} = '' OR service = {service:String})
  AND ({environment:String} = '' OR environment = {environment:String})
  AND NOT startsWith(url_path, '/.well-known/') AND url_path != '/register'
  AND if(empty({mcp_paths:Array(String)}), url_path IN endpoints, has({mcp_paths:Array(String)}, url_path));

-- Restarts inferred from the proxy log alone. Two kinds of evidence:
--  * a gap: a run of proxy-generated 5xx with no upstream-served response in
--    between; the upstream was down from the last served response before the run
--    to the first served response after it;
--  * a transition: a session whose previous upstream-served request was a 2xx
--    gets a refused miss; its server forgot it somewhere in between.
-- A transition overlapping a gap is the same restart (one restart seen both
-- ways is one restart). Transitions that overlap no gap are merged by overlap
-- into restarts of their own (a fast restart leaves no 502 at all).
CREATE VIEW IF NOT EXISTS proxy_restarts AS
WITH
-- One ordered pass over the endpoint's requests per service. For every row:
--   served_idx  upstream-served rows up to and including this one; the pg rows
--               of one gap share a served_idx (their "run")
--   pg_before   proxy-generated rows before this one: a session's transition
--               spans a gap exactly when pg_before grew between its two rows
--   last_served / next_served: the served rows around a gap
seq AS
(
    SELECT service, t, sk, http_method, pg, ok, refused, served_idx,
           sum(toUInt64(pg)) OVER w_upto - toUInt64(pg) AS pg_before,
           max(if(pg, 0., t)) OVER w_upto AS last_served,
           max(if(pg, served_idx, 0)) OVER w_upto AS last_run,
           min(if(pg, 1e12, t)) OVER (PARTITION BY service ORDER BY t ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS next_served
    FROM
    (
        SELECT service, t, sk, http_method, pg, ok, refused,
               sum(toUInt64(NOT pg)) OVER (PARTITION BY service ORDER BY t ROWS UNBOUNDED PRECEDING) AS served_idx
        FROM proxy_requests(t_from = {t_from:DateTime64(6)}, t_to = {t_to:DateTime64(6)}, service = {service:String},
                            environment = {environment:String}, mcp_paths = {mcp_paths:Array(String)})
    )
    WINDOW w_upto AS (PARTITION BY service ORDER BY t ROWS UNBOUNDED PRECEDING)
),
gaps AS
(
    SELECT service, served_idx AS run, min(t) AS first_5xx, max(t) AS last_5xx, count() AS n_5xx,
           countIf(http_method = 'POST') AS n_5xx_post, countIf(http_method = 'GET') AS n_5xx_get,
           if(min(last_served) = 0, min(t), min(last_served)) AS down_from,
           if(max(next_served) >= 1e12, CAST(NULL, 'Nullable(Float64)'), max(next_served)) AS up_at
    FROM seq
    WHERE pg
    GROUP BY service, run
),
-- A transition: the session's previous upstream-served request was a 2xx and
-- this one is a refused miss. matched: a gap lies between the two rows; it is
-- then credited to the last gap before the refusal (last_run).
trans AS
(
    SELECT service, sk, prev_t AS lo, t AS hi, pg_before > prev_pg_before AS matched, last_run AS run
    FROM
    (
        SELECT service, sk, t, refused, last_run, pg_before,
               lagInFrame(toUInt8(ok), 1, 0) OVER w AS prev_ok,
               lagInFrame(t, 1, 0.) OVER w AS prev_t,
               lagInFrame(pg_before, 1, 0) OVER w AS prev_pg_before
        FROM seq
        WHERE sk != '' AND NOT pg
        WINDOW w AS (PARTITION BY sk ORDER BY t ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
    )
    WHERE refused AND prev_ok = 1
),
-- Transitions that span no gap, merged by overlap: each group is one restart.
clusters AS
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
SELECT
    g.service AS service,
    if(m.sessions > 0, 'proxy_5xx_gap+session_refusals', 'proxy_5xx_gap') AS evidence,
    g.down_from AS down_from,
    g.up_at AS up_at,
    -- observed downtime: from the first proxy-generated 5xx to the first served
    -- response after it (down_from is the earliest the upstream could have gone)
    g.up_at - g.first_5xx AS downtime_s,
    g.first_5xx AS first_5xx,
    g.last_5xx AS last_5xx,
    g.n_5xx AS proxy_5xx,
    g.n_5xx_post AS proxy_5xx_post,
    g.n_5xx_get AS proxy_5xx_get,
    ifNull(m.sessions, 0) AS sessions_refused
FROM gaps AS g
LEFT JOIN (SELECT service, run, uniqExact(sk) AS sessions FROM trans WHERE matched GROUP BY service, run) AS m
    ON m.service = g.service AND m.run = g.run
UNION ALL
SELECT
    service,
    'session_refusals' AS evidence,
    max(lo) AS down_from,
    CAST(min(hi), 'Nullable(Float64)') AS up_at,
    CAST(NULL, 'Nullable(Float64)') AS downtime_s,
    CAST(NULL, 'Nullable(Float64)') AS first_5xx,
    CAST(NULL, 'Nullable(Float64)') AS last_5xx,
    toUInt64(0) AS proxy_5xx,
    toUInt64(0) AS proxy_5xx_post,
    toUInt64(0) AS proxy_5xx_get,
    count() AS sessions_refused
FROM clusters
GROUP BY service, cluster;

-- Re-mints inferred from the proxy: a refused miss on session A, then an
-- initialize minting B from the same client (address and user agent: the new
-- initialize usually comes on a new TCP connection) within window_s seconds.
-- Each replacement is credited to one stale session (the latest miss before it).
-- adopted: some later request carried B.
CREATE VIEW IF NOT EXISTS proxy_remint_pairs AS
WITH
r AS
(
    SELECT t, sk, rk, client, refused, init, ua_family
    FROM proxy_requests(t_from = {t_from:DateTime64(6)}, t_to = {t_to:DateTime64(6)}, service = {service:String},
                        environment = {environment:String}, mcp_paths = {mcp_paths:Array(String)})
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
LEFT JOIN used AS u ON u.sk = p.replacement;
