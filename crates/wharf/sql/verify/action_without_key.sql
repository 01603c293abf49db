SELECT count(*) FROM wharf.action a
 WHERE NOT EXISTS (SELECT 1 FROM wharf.action_key k
                    WHERE k.idempotency_key = a.idempotency_key AND k.action_id = a.id)
