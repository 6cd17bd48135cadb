-- proxy_signals, server_signals: the rare rows of proxy_access (0006) and
-- server_requests (0007) that the named queries look up by their class, kept a
-- second time on their own:
--   proxy:  refused misses, initializes, proxy-generated 5xx, 401/403 challenges
--   server: refused misses, initializes, settlements served through an alias
-- (each class as 0006/0007 define it; none of them depends on the service or
-- environment label, so a line relabelled by a re-import stays in or out).
--
-- Why: these rows are 2-4% of the lines, spread over every granule (a refused
-- miss every few seconds), so a read of one class read every granule of the
-- columns it needs: about 60-100 ms per read at 10M events, and a query made up
-- to five such reads (refused misses and initializes for the re-mints, the
-- 5xx for the gaps, ...). From a table of only them, the same read takes about
-- 10-25 ms (measured side by side on the bench store).
--
-- The same columns, engine, sort key and retention as the table each copies
-- (CREATE TABLE ... AS: a later column added there must be added here too, the
-- views copy every column), so a reader reads them exactly as it read the big
-- table: with FINAL for the proxy (the newest copy of a line delivered again),
-- LIMIT 1 BY event_id where the server's rows are counted. Filled by views on
-- the big tables, in the same insert (a retried batch is dropped here too:
-- deduplicate_blocks_in_dependent_materialized_views, store/client.ts);
-- retention follows events (store/migrate.ts RETAINED_TABLES).
CREATE TABLE IF NOT EXISTS proxy_signals AS proxy_access;

CREATE MATERIALIZED VIEW IF NOT EXISTS proxy_signals_mv TO proxy_signals AS
SELECT * FROM proxy_access
WHERE refused OR init OR pg OR http_status IN (401, 403);

CREATE TABLE IF NOT EXISTS server_signals AS server_requests;

CREATE MATERIALIZED VIEW IF NOT EXISTS server_signals_mv TO server_signals AS
SELECT * FROM server_requests
WHERE refused OR init OR (event_type = 'settlement' AND session_resolution = 'alias');

-- The store's rows so far. FINAL: where a line was delivered twice with different
-- labels, only the newest copy is copied (both copies in one part would leave the
-- choice between them to the order of the rows).
INSERT INTO proxy_signals
SELECT * FROM proxy_access FINAL
WHERE refused OR init OR pg OR http_status IN (401, 403);

INSERT INTO server_signals
SELECT * FROM server_requests FINAL
WHERE refused OR init OR (event_type = 'settlement' AND session_resolution = 'alias');
