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
--                        of their service (before the earlier and after the later of the
--                        restart's down_from and up_at)
-- Each session's facts come from the fragment session_facts (how each is read: see
-- there), the restarts from restart_spans: the restarts the `restarts` query lists.
-- Where checks/unmatched_transitions.sql counts nothing, runQuery reads this text with
-- restart_spans from the boots and the gaps alone (lib/restart_spans_no_transitions.sql;
-- queries/registry.ts NARROWED_QUERIES): no transition then adds a span.
-- requires: session_facts, restart_spans
WITH
-- per group (g_all, g_service: below) and start lo, the two earliest ends
-- (end_1 <= end_2, seconds; inf: none) among the group's restarts that start at or
-- after lo. In the order of start, latest first, end_1 is the running minimum, and
-- end_2 the running minimum of each restart's end against the minimum before it
-- (greatest(hi, end_1 of the rows before)): the second smallest of a sequence is
-- the smallest of those. Restarts with the same start: the value after the last
-- of them.
-- (read once, as a scalar: the two lookups below read spans, and a CTE read twice is
-- computed twice: restart_spans is most of this query's analysis)
(
    SELECT groupArray((g_all, g_service, lo, end_1, end_2))
    FROM
    (
        SELECT g_all, g_service, lo, min(m1) AS end_1, min(m2) AS end_2
        FROM
        (
            SELECT g_all, g_service, lo, m1,
                   min(c) OVER (PARTITION BY g_all, g_service ORDER BY lo DESC, hi ROWS UNBOUNDED PRECEDING) AS m2
            FROM
            (
                SELECT g.1 AS g_all, g.2 AS g_service, lo, hi,
                       min(hi) OVER (PARTITION BY g_all, g_service ORDER BY lo DESC, hi ROWS UNBOUNDED PRECEDING) AS m1,
                       greatest(hi, ifNull(minOrNull(hi) OVER (PARTITION BY g_all, g_service ORDER BY lo DESC, hi
                                                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), inf)) AS c
                FROM restart_spans
                ARRAY JOIN [(toUInt8(0), service), (toUInt8(1), '')] AS g
            )
        )
        GROUP BY g_all, g_service, lo
    )
) AS span_rows,
spans AS
(
    SELECT x.1 AS g_all, x.2 AS g_service, x.3 AS lo, x.4 AS end_1, x.5 AS end_2, toUInt8(1) AS hit
    FROM (SELECT arrayJoin(span_rows) AS x)
)
SELECT
    ua_family,
    origin,
    countIf(first) AS sessions,
    countIf(first AND was_minted AND NOT was_used) AS minted_unused,
    countIf(first AND is_stale) AS stale,
    countIf(first AND is_recovered) AS recovered,
    countIf(first AND is_stale AND NOT is_recovered) AS unrecovered_stale,
    countIf(first AND is_stale AND NOT is_recovered AND NOT refused_before_range) AS unrecovered_new,
    countIf(first AND is_abandoned) AS abandoned_after_failure,
    -- a session of several labels has a row per label: its restarts are summed by
    -- session (sumMap over those sessions only, rare)
    countIf(NOT several AND crossed >= 1) + arrayCount(n -> n >= 1, sumMapIf([session_key], [toUInt64(crossed)], several).2) AS survived_1,
    countIf(NOT several AND crossed >= 2) + arrayCount(n -> n >= 2, sumMapIf([session_key], [toUInt64(crossed)], several).2) AS survived_2
FROM
(
    -- per session, the restarts of its service it straddled: 2xx before the span
    -- and after it (first_ok_t < lo, hi < last_ok_t). A restart is the session's
    -- when they share a service label, or either has none (as restart_rows.sql pairs
    -- a boot with a proxy gap); another service's restart is not (every restart
    -- counted for every session before: a break-it pass with 5000 services gave
    -- survived_2 5001 where 1 session crossed two). Only one or two matter, so a
    -- session takes the two earliest ends among its restarts that start after its
    -- first 2xx (spans, above) and counts those before its last 2xx. The restarts
    -- are in disjoint groups, (0, service) by label ('' unlabelled) and (1, '') all
    -- of them: an unlabelled session reads all (lookup a); a labelled one its
    -- label's (a) and the unlabelled (b); one of several labels a row per label,
    -- the first of which also reads the unlabelled. (Testing every restart against
    -- every session took 13.9 s for 30,000 restarts; this is sessions + restarts.)
    SELECT
        s.*,
        if(s.last_ok_t > 0,
           if(a.hit = 1, (a.end_1 < s.last_ok_t) + (a.end_2 < s.last_ok_t), 0)
             + if(b.hit = 1, (b.end_1 < s.last_ok_t) + (b.end_2 < s.last_ok_t), 0),
           0) AS crossed
    FROM
    (
        SELECT *, length(services) >= 2 AS several, arrayJoin(arrayEnumerate(if(several, services, ['']))) AS i, i = 1 AS first,
               if(empty(services), toUInt8(1), toUInt8(0)) AS a_all, if(empty(services), '', services[i]) AS a_service,
               -- (2: no group, for the rows that read no unlabelled restarts)
               if(first AND NOT empty(services), toUInt8(0), toUInt8(2)) AS b_all
        FROM session_facts
    ) AS s
    -- the spans starting after its first 2xx: the suffix from the earliest of them
    ASOF LEFT JOIN spans AS a ON a.g_all = s.a_all AND a.g_service = s.a_service AND s.first_ok_t < a.lo
    ASOF LEFT JOIN spans AS b ON b.g_all = s.b_all AND b.g_service = '' AND s.first_ok_t < b.lo
)
GROUP BY ua_family, origin
ORDER BY sessions DESC
