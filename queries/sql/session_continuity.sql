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
-- proxy_transitions empty (lib/no_proxy_transitions.sql; queries/registry.ts
-- NARROWED_QUERIES): no transition then adds a span.
-- requires: session_facts, restart_spans
SELECT
    ua_family,
    origin,
    count() AS sessions,
    countIf(was_minted AND NOT was_used) AS minted_unused,
    countIf(is_stale) AS stale,
    countIf(is_recovered) AS recovered,
    countIf(is_stale AND NOT is_recovered) AS unrecovered_stale,
    countIf(is_stale AND NOT is_recovered AND NOT refused_before_range) AS unrecovered_new,
    countIf(is_abandoned) AS abandoned_after_failure,
    countIf(crossed >= 1) AS survived_1,
    countIf(crossed >= 2) AS survived_2
FROM
(
    -- the restarts of its service the session straddled: 2xx before the span and
    -- after it. A restart is the session's when they share a service label, or
    -- either has none (as restart_rows.sql pairs a boot with a proxy gap); another
    -- service's restart is not (every restart counted for every session before: a
    -- break-it pass with 5000 services gave survived_2 5001 where 1 session crossed two).
    SELECT s.*, if(s.last_ok_t > 0,
                   arrayCount(span -> span.2 > s.first_ok_t AND span.3 < s.last_ok_t AND (span.1 = '' OR empty(s.services) OR has(s.services, span.1)), x.spans),
                   0) AS crossed
    FROM session_facts AS s
    CROSS JOIN (SELECT groupArray((service, lo, hi)) AS spans FROM restart_spans) AS x
)
GROUP BY ua_family, origin
ORDER BY sessions DESC
