-- restart_spans_no_transitions: restart_spans.sql's rows where no proxy session
-- transition adds a restart (session_continuity's narrowed form, queries/registry.ts
-- NARROWED_QUERIES: checks/unmatched_transitions.sql counted no transition that
-- matches no gap, so every proxy restart is a gap), built from the boots and the
-- gaps alone, without restart_rows' evidence, 5xx counts and the transitions'
-- clusters (about 40 ms less analysis and work per call at 10M events, the spans
-- being read at two lookups). The same rows as restart_spans.sql then:
--  * every server boot that follows an earlier one, from its previous boot's end
--    (down_from) to the boot;
--  * every proxy gap (proxy_gaps.sql) that brackets no such boot, by restart_rows.sql's
--    rule (same service, or either unlabelled; the boot within 1 s of the gap's
--    down..up span), from its down_from to its up_at (none yet: the instant down_from).
-- test/queries-narrowed.test.ts checks both forms give the same rows.
-- requires: proxy_gaps, server_boots
WITH
(SELECT groupArray((service, boot_t, down_from)) FROM server_boots WHERE is_restart) AS boot_rows,
(SELECT groupArray((service, down_from, up_at)) FROM proxy_gaps) AS gap_rows
SELECT r.1 AS service, least(r.2, r.3) AS lo, greatest(r.2, r.3) AS hi
FROM
(
    SELECT arrayJoin(arrayConcat(
        arrayMap(b -> (b.1, b.3, b.2), boot_rows),
        arrayMap(g -> (g.1, g.2, ifNull(g.3, g.2)),
                 arrayFilter(g -> NOT arrayExists(b -> (g.1 = b.1 OR g.1 = '' OR b.1 = '') AND b.2 >= g.2 - 1 AND b.2 <= ifNull(g.3, g.2) + 1, boot_rows), gap_rows))
    )) AS r
)
