-- session_outcomes check (queries/registry.ts countSessionOutcomes): the
-- session_continuity query's rows without survived_1/2, which need every restart
-- in the range (fragment restart_spans, most of that query's analysis and much of
-- its run). The canary report's gate 4 (sessions that lost their tools) reads it
-- over the deploy window; the survivors of its deploy come from sessions_across.
-- The same fragment and the same counts as session_continuity.sql.
-- requires: session_facts
SELECT
    ua_family,
    origin,
    count() AS sessions,
    countIf(was_minted AND NOT was_used) AS minted_unused,
    countIf(is_stale) AS stale,
    countIf(is_recovered) AS recovered,
    countIf(is_stale AND NOT is_recovered) AS unrecovered_stale,
    countIf(is_stale AND NOT is_recovered AND NOT refused_before_range) AS unrecovered_new,
    countIf(is_abandoned) AS abandoned_after_failure
FROM session_facts
GROUP BY ua_family, origin
ORDER BY sessions DESC
