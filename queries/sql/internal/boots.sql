-- boots (queries/registry.ts listBoots): every server boot in the range and scope,
-- in time order, with the boot before it of the same service (server_boots.sql).
-- The canary resolves its deploy from these rows (a few per deploy) and then reads
-- `restarts` from two boots before it on, instead of over the whole store.
-- requires: server_boots
SELECT service, boot_id, release, boot_t, prev_boot_id
FROM server_boots
ORDER BY boot_t, service, boot_id
