-- The parameterized views of 0003 and 0004 are superseded by the query fragments in
-- queries/sql/lib/ (composed into each named query by queries/registry.ts). A view
-- is inlined at every reference, and the named queries referenced them several
-- times each, nested, so one query ran the same window pass over the proxy's
-- requests many times; at 10M events some never finished. The fragments let each
-- query read a shared step once (into a scalar) and use cheaper forms (ASOF joins,
-- running frames). Nothing else reads these views.
DROP VIEW IF EXISTS proxy_remint_pairs;
DROP VIEW IF EXISTS proxy_restarts;
DROP VIEW IF EXISTS proxy_requests;
DROP VIEW IF EXISTS server_refused;
DROP VIEW IF EXISTS server_boots;
