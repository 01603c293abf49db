-- Every accepted identity was audited in the transaction that stored it.
SELECT count(*) FROM wharf.inbox_identities i
  JOIN wharf.inbox_streams s ON s.stream_id = i.stream_id
 WHERE NOT EXISTS (SELECT 1 FROM wharf.inbox_audit a
                    WHERE a.action = 'ingest'
                      AND a.tenant_id = s.tenant_id
                      AND a.event_id_sha256 = encode(sha256(convert_to(i.event_id, 'UTF8')), 'hex')
                      AND a.outcome = i.outcome)
