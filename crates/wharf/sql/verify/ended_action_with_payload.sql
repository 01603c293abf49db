SELECT count(*) FROM wharf.action
 WHERE state IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED')
   AND (payload IS NOT NULL OR stop_reason IS NULL OR ended_at IS NULL)
