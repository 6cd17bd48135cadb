-- unmatched_transitions check (queries/registry.ts NARROWED_QUERIES): the refused
-- misses the proxy logged on a session in the range and scope that may be a session
-- transition no restart gap matches (proxy_transitions.sql: the session's previous
-- upstream-served request was a 2xx, and no proxy-generated 5xx of its service lies
-- between the two). Only such a transition can add a restart span of its own
-- (proxy_restarts.sql: a matched one is credited to its gap, whose span is the
-- gap's), so zero lets `session_continuity` run without computing the transitions
-- (lib/restart_spans_no_transitions.sql).
-- Without the session's lines: for each miss, g is the last 5xx of its service before
-- it (the same 5xx rows as proxy_seq.sql; 0 = none). An unmatched transition has its
-- previous request, a 2xx, at or after g and before the miss, so some hour of the
-- session (the rollup proxy_sessions for the hours the range covers whole and
-- without a service or environment filter, as session_facts.sql reads it, else the
-- lines) has its first 2xx before the miss and its last at or after g. The check
-- counts the misses with such an hour: it can count a miss that is no unmatched
-- transition (2xx before g and after the miss in one hour, a rollup row a re-import
-- relabelled), never miss one. Each miss is its line (event_id and time): two lines of
-- one session at the same microsecond are two transitions (proxy_refused.sql keeps
-- both), so they are counted apart. Times are compared as the float seconds the fragments
-- compare (distinct microseconds stay distinct and ordered at these magnitudes), with
-- `<=` where the transition's rule is `<`.
-- requires: proxy_lines, proxy_signal_lines
WITH
{whole_hour_lo:UInt32} AS hour_lo,
{whole_hour_hi:UInt32} AS hour_hi,
hour_lo < hour_hi AND {service:String} = '' AND {environment:String} = '' AS proxy_rollup,
windows AS
(
    SELECT m.event_id AS event_id, m.skh AS skh, m.t AS t, g.t AS g
    FROM (SELECT event_id, service, skh, t FROM proxy_signal_lines WHERE refused AND skh != 0) AS m
    ASOF LEFT JOIN
    (
        SELECT service, t FROM proxy_signal_lines
        WHERE pg AND ({proxy_gap_scan:UInt8} = 1 OR toStartOfMinute(ts) IN {proxy_gap_minutes:Array(DateTime('UTC'))})
    ) AS g ON g.service = m.service AND g.t < m.t
),
-- each hour of a session with a 2xx: its first and last (a line in the cut hours,
-- or every line under a filter, is an hour of its own)
ok_hours AS
(
    SELECT h, first_ok, last_ok FROM proxy_sessions
    WHERE proxy_rollup AND ts >= toDateTime(hour_lo, 'UTC') AND ts < toDateTime(hour_hi, 'UTC')
      AND url_path IN {endpoint_paths:Array(String)} AND last_ok > 0
    UNION ALL
    SELECT skh AS h, t AS first_ok, t AS last_ok FROM proxy_lines
    WHERE NOT (proxy_rollup AND ts >= {whole_from:DateTime64(6, 'UTC')} AND ts < {whole_to:DateTime64(6, 'UTC')}) AND ok AND skh != 0
)
SELECT uniqExact(w.event_id, w.t) AS n
FROM ok_hours AS o
INNER JOIN windows AS w ON w.skh = o.h
WHERE o.first_ok <= w.t AND o.last_ok >= w.g
