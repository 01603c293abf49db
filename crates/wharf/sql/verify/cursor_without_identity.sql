-- The cursor stands on an identity, or on a sequence an audited operator skip moved it to.
SELECT count(*) FROM wharf.inbox_streams s
 WHERE s.acknowledged_sequence > 0
   AND NOT EXISTS (SELECT 1 FROM wharf.inbox_identities i
                    WHERE i.stream_id = s.stream_id
                      AND i.producer_sequence = s.acknowledged_sequence)
   AND NOT EXISTS (SELECT 1 FROM wharf.inbox_audit a
                    WHERE a.action = 'stream-skip'
                      AND a.tenant_id = s.tenant_id AND a.project_id = s.project_id
                      AND a.producer_kind = s.producer_kind AND a.producer_id = s.producer_id
                      AND a.sequence_after >= s.acknowledged_sequence)
