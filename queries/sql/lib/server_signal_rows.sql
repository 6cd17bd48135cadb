-- server_signal_rows: the server's refused misses, initializes and alias
-- settlements in the range and scope, from server_signals
-- (schema/migrations/0012), which holds only those rows of server_requests, so
-- a read of one of those classes reads a small table. With FINAL (cheap there): a
-- server event delivered again under another label counts under its newest one
-- only, as the proxy's lines do, whatever the merges. Only those classes: any
-- other server request must be read from server_requests.
-- own_client: the row names its client itself (user agent and principal both
-- set). The collector stamps a refused miss with its request's; another producer
-- may not, and a miss without its own client takes its arrival's (by arh):
-- server_refused.sql and session_facts.sql both follow this rule.
SELECT *, user_agent != '' AND principal_key != '' AS own_client FROM server_signals FINAL
WHERE ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
  AND ({service:String} = '' OR service = {service:String})
  AND ({environment:String} = '' OR environment = {environment:String})
