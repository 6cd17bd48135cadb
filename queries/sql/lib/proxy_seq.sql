-- proxy_seq: the proxy-generated 5xx (the rows of the restart gaps, DESIGN §4),
-- each with the upstream-served requests of its service around it:
--   last_served  the last served request before it (0 = none); the 5xx rows of
--                one gap share it, so it names the gap ("run")
--   next_served  the first served request after it (1e12 = none yet)
-- Found by ASOF joins of the few 5xx rows against the served rows, so no window
-- runs over every request.
-- requires: proxy_requests
SELECT p.service AS service, p.t AS t, p.sk AS sk, p.http_method AS http_method,
       b.t AS last_served, b.t AS run,
       if(a.t = 0, 1e12, a.t) AS next_served
FROM (SELECT service, t, sk, http_method FROM proxy_requests WHERE pg) AS p
ASOF LEFT JOIN (SELECT service, t FROM proxy_requests WHERE NOT pg) AS b ON b.service = p.service AND b.t < p.t
ASOF LEFT JOIN (SELECT service, t FROM proxy_requests WHERE NOT pg) AS a ON a.service = p.service AND a.t > p.t
