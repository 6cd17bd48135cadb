-- restart_spans: every restart in the range as the span a session must straddle
-- to have survived it (session_continuity.sql's survived_1/2), lo <= hi in seconds:
-- the restarts the `restarts` query lists (restart_rows.sql), each from the earlier
-- to the later of its down_from and up_at. Where the old and new instances
-- overlapped (down_from after the boot), a session crossed only if served before
-- the new boot and after the old instance's end. A proxy restart not back up when
-- the range ends is the instant down_from. service: the restart's ('' unlabelled).
-- requires: restart_rows
SELECT service, least(down_t, ifNull(up_t, down_t)) AS lo, greatest(down_t, ifNull(up_t, down_t)) AS hi
FROM restart_rows
