SELECT count(*) FROM wharf.inbox_payloads p
 WHERE NOT EXISTS (SELECT 1 FROM wharf.inbox_identities i WHERE i.identity_id = p.identity_id)
