-- restart_spans: every restart in the range as the span a session must straddle
-- to have survived it (session_continuity.sql's survived_1/2), lo < hi in seconds:
-- the restarts the `restarts` query lists, by its rule (restarts.sql): each server
-- boot that follows an earlier boot of its service, and each proxy-inferred restart
-- (proxy_restarts.sql) that brackets no server boot (same service, or either
-- unlabelled; the boot within 1 s of the proxy's down..up span). A span runs from
-- the earlier to the later of its down_from and up_at: where the old and new
-- instances overlapped (down_from after the boot), a session crossed only if served
-- before the new boot and after the old instance's end. A proxy restart not back up
-- when the range ends is the instant down_from.
-- requires: proxy_restarts, server_boots
WITH
(SELECT groupArray((service, down_from, boot_t)) FROM server_boots WHERE is_restart) AS server_rows,
(SELECT groupArray((service, down_from, ifNull(up_at, down_from))) FROM proxy_restarts) AS proxy_rows
SELECT least(sp.1, sp.2) AS lo, greatest(sp.1, sp.2) AS hi
FROM
(
    SELECT arrayJoin(arrayConcat(
        arrayMap(s -> (s.2, s.3), server_rows),
        arrayMap(p -> (p.2, p.3),
            arrayFilter(p -> NOT arrayExists(s -> (p.1 = s.1 OR p.1 = '' OR s.1 = '') AND s.3 >= p.2 - 1 AND s.3 <= p.3 + 1, server_rows), proxy_rows))
    )) AS sp
)
