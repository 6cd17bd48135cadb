-- server_restarts check (queries/registry.ts listServerRestarts): the server rows
-- of the `restarts` query alone, to resolve a canary's deploy without running the
-- proxy inference over the whole store. Every boot that follows an earlier boot of
-- its service (fragment server_boots); up_at is the boot and down_from the boot
-- before it's shutdown, else last 2xx, else last event, converted as restarts'
-- columns are, so the two compare equal.
-- requires: server_boots
SELECT service, boot_id, release, toDateTime64(boot_t, 6, 'UTC') AS up_at, toDateTime64(down_from, 6, 'UTC') AS down_from, prev_boot_id
FROM server_boots
WHERE is_restart
ORDER BY up_at, service, boot_id
