-- mcp_paths check (queries/registry.ts checkMcpPaths): do the configured MCP
-- endpoint paths (mcp_paths, CONTINUITY_MCP_PATHS) match the proxy log? A wrong
-- path turns every proxy-derived number into 0 without an error.
--
-- Reads the lines proxy_endpoints.sql reads (the range, service and environment;
-- discovery probes never) on the configured paths and on the paths the inference
-- would take as the endpoint without mcp_paths (a request carried Mcp-Session-Id
-- or Mcp-Protocol-Version, or a response minted a session: marks_endpoint).
-- One row:
--   matched         configured paths with at least one line
--   endpoints       inferred endpoint paths that are not configured, the most
--                   session-marked lines first, at most 5
--   endpoint_count  how many such paths in all
-- Without FINAL: a duplicate line not merged yet can change an order, never
-- whether a path has lines.

SELECT
    groupArrayIf(url_path, configured) AS matched,
    arraySlice(arrayMap(p -> p.2, arraySort(p -> (-p.1, p.2), groupArrayIf((marked, url_path), NOT configured AND marked > 0))), 1, 5) AS endpoints,
    countIf(NOT configured AND marked > 0) AS endpoint_count
FROM
(
    SELECT url_path, has({mcp_paths:Array(String)}, url_path) AS configured, countIf(marks_endpoint) AS marked
    FROM proxy_access
    WHERE ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
      AND NOT discovery
      AND (marks_endpoint OR has({mcp_paths:Array(String)}, url_path))
    GROUP BY url_path
)
