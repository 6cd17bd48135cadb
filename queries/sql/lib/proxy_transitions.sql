-- proxy_transitions: a session whose previous upstream-served request (not a
-- proxy-generated 5xx) was a 2xx gets a refused miss: its server forgot it somewhere
-- in between (DESIGN §4). lo, hi: the two requests' times. matched: a gap of
-- proxy-generated 5xx of the same service lies between them; it is then credited
-- to the last gap before the refusal (run: that gap's name in proxy_seq).
-- Each refused miss finds its session's previous served request, and the last
-- proxy-generated 5xx of its service before it, by ASOF joins; for the first only
-- the requests of sessions that have a refused miss are read.
-- requires: proxy_requests, proxy_seq
SELECT r.service AS service, r.sk AS sk, r.skh AS skh, p.t AS lo, r.t AS hi,
       g.t > p.t AS matched,
       g.run AS run
FROM
(
    SELECT service, sk, skh, t FROM proxy_requests WHERE refused AND skh != 0
) AS r
ASOF INNER JOIN
(
    SELECT skh, t, ok FROM proxy_requests
    WHERE NOT pg AND skh IN (SELECT skh FROM proxy_requests WHERE refused AND skh != 0)
) AS p ON p.skh = r.skh AND p.t < r.t
ASOF LEFT JOIN (SELECT service, t, run FROM proxy_seq) AS g ON g.service = r.service AND g.t < r.t
WHERE p.ok
