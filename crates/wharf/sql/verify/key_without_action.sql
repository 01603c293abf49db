SELECT count(*) FROM wharf.action_key k
 WHERE NOT EXISTS (SELECT 1 FROM wharf.action a
                    WHERE a.id = k.action_id AND a.idempotency_key = k.idempotency_key)
