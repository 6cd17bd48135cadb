-- server_sessions.last_arrival: the latest arrival carrying the session's id in
-- the hour (seconds; 0 = none). server_refused (queries/sql/lib) asks, for each
-- refused miss, whether the session's id arrived again after it
-- (same_session_again). last_t cannot answer that: it counts settlements too, and
-- the refused request's own settlement comes after the miss. Without this column
-- the question read the session id of every arrival in the range (about 0.45 s
-- at 10M events); with it, the whole hours come from the rollup and only the hours
-- the range cuts from the rows.
--
-- The view is recreated with the column, and the store's rows are aggregated again
-- into the rollup: every column is a max or a min, so a second aggregate of the
-- same rows changes nothing but fills last_arrival (read without FINAL, as the
-- view reads server_requests, like 0008's backfill of this table). That second
-- aggregate is a second row per session and hour until the parts merge, and every
-- reader of the rollup would read twice the rows (at 10M events 1.36M instead of
-- 0.67M, and `restarts` and `session_continuity` about 0.3 s slower), so the
-- migration merges them at once (OPTIMIZE ... FINAL: about 2 s at 10M events).
ALTER TABLE server_sessions ADD COLUMN IF NOT EXISTS last_arrival SimpleAggregateFunction(max, Float64);

DROP VIEW IF EXISTS server_sessions_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS server_sessions_mv TO server_sessions AS
SELECT
    toStartOfHour(ts) AS ts, service, environment, toString(boot_id) AS boot_id,
    k.1 AS h,
    max(if(k.2 = 1 OR NOT init, clienth, toUInt128(0))) AS client,
    max(if(k.2 = 1 OR NOT init, toString(ua_family), '')) AS ua_family,
    max(toUInt8(k.2 = 0 AND NOT init)) AS used,
    max(toUInt8(k.2 = 1)) AS minted,
    min(if(k.2 = 0 AND ok, t, inf)) AS first_ok,
    max(if(k.2 = 0 AND ok, t, 0.)) AS last_ok,
    max(if(k.2 = 0 AND NOT init, t, 0.)) AS last_t,
    max(if(k.2 = 0 AND event_type != 'arrival', (t, toUInt8(NOT ok)), (0., toUInt8(0)))) AS last,
    max(if(k.2 = 0 AND refused, t, 0.)) AS last_refused,
    max(if(k.2 = 0, t, 0.)) AS t_max,
    max(if(k.2 = 0 AND event_type = 'settlement' AND http_status BETWEEN 200 AND 299, t, 0.)) AS ok_2xx_max,
    max(if(k.2 = 0 AND event_type = 'arrival', t, 0.)) AS last_arrival
FROM server_requests
ARRAY JOIN [(skh, toUInt8(0)), (mkh, toUInt8(1))] AS k
WHERE k.2 = 0 OR (k.1 != 0 AND event_type = 'settlement')
GROUP BY ts, service, environment, boot_id, h;

INSERT INTO server_sessions
SELECT
    toStartOfHour(ts) AS ts, service, environment, toString(boot_id) AS boot_id,
    k.1 AS h,
    max(if(k.2 = 1 OR NOT init, clienth, toUInt128(0))) AS client,
    max(if(k.2 = 1 OR NOT init, toString(ua_family), '')) AS ua_family,
    max(toUInt8(k.2 = 0 AND NOT init)) AS used,
    max(toUInt8(k.2 = 1)) AS minted,
    min(if(k.2 = 0 AND ok, t, inf)) AS first_ok,
    max(if(k.2 = 0 AND ok, t, 0.)) AS last_ok,
    max(if(k.2 = 0 AND NOT init, t, 0.)) AS last_t,
    max(if(k.2 = 0 AND event_type != 'arrival', (t, toUInt8(NOT ok)), (0., toUInt8(0)))) AS last,
    max(if(k.2 = 0 AND refused, t, 0.)) AS last_refused,
    max(if(k.2 = 0, t, 0.)) AS t_max,
    max(if(k.2 = 0 AND event_type = 'settlement' AND http_status BETWEEN 200 AND 299, t, 0.)) AS ok_2xx_max,
    max(if(k.2 = 0 AND event_type = 'arrival', t, 0.)) AS last_arrival
FROM server_requests
ARRAY JOIN [(skh, toUInt8(0)), (mkh, toUInt8(1))] AS k
WHERE k.2 = 0 OR (k.1 != 0 AND event_type = 'settlement')
GROUP BY ts, service, environment, boot_id, h
SETTINGS max_insert_threads = 1;

OPTIMIZE TABLE server_sessions FINAL;
