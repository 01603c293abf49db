SELECT count(*) FROM wharf.action_live
 WHERE state = 'EXECUTING' AND (lease_expires_at IS NULL OR epoch < 1 OR attempt < 1)
