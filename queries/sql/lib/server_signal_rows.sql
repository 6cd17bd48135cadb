-- server_signal_rows: the server's refused misses, initializes and alias
-- settlements in the range and scope, from server_signals
-- (schema/migrations/0012), which holds only those rows of server_requests, so
-- a read of one of those classes reads a small table. With FINAL (cheap there): a
-- server event delivered again under another label counts under its newest one
-- only, as the proxy's lines do, whatever the merges. Only those classes: any
-- other server request must be read from server_requests.
SELECT * FROM server_signals FINAL
WHERE ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
  AND ({service:String} = '' OR service = {service:String})
  AND ({environment:String} = '' OR environment = {environment:String})
