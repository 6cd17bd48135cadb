-- proxy_transitions: a session whose previous upstream-served request (not a
-- proxy-generated 5xx) was a 2xx gets a refused miss: its server forgot it somewhere
-- in between (DESIGN §4). lo, hi: the two requests' times. matched: a gap of
-- proxy-generated 5xx of the same service lies between them; it is then credited
-- to the last gap before the refusal (run: that gap's name in proxy_seq). The
-- last gap row before each refusal comes from one ordered pass over the refusals
-- and the gaps' rows together (a gap row at the refusal's own time is not before it).
-- The previous request comes from proxy_refused_prev (an ASOF join per miss), not
-- proxy_refused (every refused session's lines gathered and sorted, for neighbours
-- this does not read): `restarts` at 10M events 839 -> 773 ms, medians of 9 side by
-- side (2026-12-03).
-- requires: proxy_refused_prev, proxy_seq
SELECT service, skh, prev_t AS lo, t AS hi, gap.1 > prev_t AS matched, gap.2 AS run
FROM
(
    SELECT service, skh, t, prev_t, is_gap,
           max(if(is_gap = 1, (t, run), (0., 0.))) OVER (PARTITION BY service ORDER BY t, is_gap ROWS UNBOUNDED PRECEDING) AS gap
    FROM
    (
        SELECT service, skh, t, prev_t, toUInt8(0) AS is_gap, 0. AS run FROM proxy_refused_prev WHERE prev_ok
        UNION ALL
        SELECT service, toUInt128(0) AS skh, t, 0. AS prev_t, toUInt8(1) AS is_gap, run FROM proxy_seq
    )
)
WHERE is_gap = 0
