-- import_runs.service, import_runs.environment: the labels an import gave its lines
-- (`continuity import caddy --service/--environment`), NULL for runs recorded before
-- this migration (their labels are unknown).
--
-- Why: the same log imported again under another label relabels its lines (the last
-- import's copy of a line is the one readers see, proxy_access is read with FINAL),
-- and nothing said so: a log imported with --service auth-svc, then analyzed without
-- it, left `report --service auth-svc` with nothing to judge (a newcomer pass). An
-- import now compares each input's content with the earlier runs of the same content
-- (decoded_hash, or one of its prefix_hashes) and says which labels it replaced
-- (collectors/caddy/import.ts `relabelled`).
ALTER TABLE import_runs ADD COLUMN IF NOT EXISTS service Nullable(String);
ALTER TABLE import_runs ADD COLUMN IF NOT EXISTS environment Nullable(String);
