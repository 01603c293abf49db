-- A retained identity right after the cursor means the cursor should have moved through it.
SELECT count(*) FROM wharf.inbox_streams s
 WHERE EXISTS (SELECT 1 FROM wharf.inbox_identities i
                WHERE i.stream_id = s.stream_id
                  AND i.producer_sequence = s.acknowledged_sequence + 1)
