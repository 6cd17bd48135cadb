-- event_span check (queries/registry.ts eventSpan): the first and the last event in
-- the range and scope, either source (NULL without one): the canary report says
-- where its deploy window or baseline runs past the store's events (an imported log
-- that ends a minute into a 15-minute window).
SELECT if(count() = 0, NULL, min(ts)) AS first_at,
       if(count() = 0, NULL, max(ts)) AS last_at
FROM events
WHERE ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
  AND ({service:String} = '' OR service = {service:String})
  AND ({environment:String} = '' OR environment = {environment:String})
