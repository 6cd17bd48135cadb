-- proxy_5xx_minutes: the minutes (their starts) that hold a proxy-generated 5xx on
-- the endpoint in the range and scope, from the signal rows: where the restart
-- gaps' lines are read (checks/proxy_gap_window.sql, queries/registry.ts
-- resolveProxyGapWindow).
-- requires: proxy_signal_lines
SELECT groupUniqArray(toStartOfMinute(ts)) AS minutes
FROM proxy_signal_lines
WHERE pg
