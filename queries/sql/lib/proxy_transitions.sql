-- proxy_transitions: a session whose previous upstream-served request (not a
-- proxy-generated 5xx) was a 2xx gets a refused miss: its server forgot it somewhere
-- in between (DESIGN §4). lo, hi: the two requests' times. matched: a gap of
-- proxy-generated 5xx of the same service lies between them; it is then credited
-- to the last gap before the refusal (run: that gap's served_idx in proxy_seq).
-- Each refused miss finds its session's previous served request by an ASOF join.
-- requires: proxy_requests, proxy_seq
SELECT r.service AS service, r.sk AS sk, p.t AS lo, r.t AS hi,
       arrayExists(y -> y.1 = r.service AND y.2 > p.t AND y.2 < r.t, pg_rows) AS matched,
       arrayLast(y -> y.1 = r.service AND y.2 < r.t, pg_rows).3 AS run
FROM
(
    SELECT service, sk, t FROM proxy_requests WHERE refused AND sk != ''
) AS r
ASOF INNER JOIN
(
    SELECT sk, t, ok FROM proxy_requests WHERE NOT pg AND sk != ''
) AS p ON p.sk = r.sk AND p.t < r.t
-- the gaps' rows, read once: (service, t, run), in time order
CROSS JOIN (SELECT arraySort(x -> x.2, groupArray((service, t, served_idx))) AS pg_rows FROM proxy_seq) AS g
WHERE p.ok
