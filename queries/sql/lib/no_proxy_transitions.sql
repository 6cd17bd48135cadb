-- no_proxy_transitions: proxy_transitions' columns and no rows, read in its place by
-- session_continuity's narrowed form (queries/registry.ts NARROWED_QUERIES) where
-- checks/unmatched_transitions.sql proved that every transition is matched to a
-- gap, so that none adds a restart span: the refused sessions' lines are not read.
SELECT CAST('' AS LowCardinality(String)) AS service, toUInt128(0) AS skh, 0. AS lo, 0. AS hi, toUInt8(0) AS matched, 0. AS run
WHERE 0
