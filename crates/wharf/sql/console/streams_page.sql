-- Streams of (tenant $1, project $2) in stream id order after $3 (NULL: from the first), at
-- most $4, each with the first $5 retained sequences beyond its cursor (from which the gaps are
-- read) and how many there are, counted over at most $6.
SELECT s.stream_id, s.producer_kind, s.producer_id::text, s.acknowledged_sequence::text,
       s.replay_floor::text, s.created_at, s.updated_at,
       (SELECT count(*) FROM (SELECT 1 FROM wharf.inbox_identities i
                               WHERE i.stream_id = s.stream_id
                                 AND i.producer_sequence > s.acknowledged_sequence
                               LIMIT $6) a) AS retained_ahead,
       ARRAY(SELECT i.producer_sequence::text FROM wharf.inbox_identities i
             WHERE i.stream_id = s.stream_id AND i.producer_sequence > s.acknowledged_sequence
             ORDER BY i.producer_sequence LIMIT $5) AS ahead
FROM wharf.inbox_streams s
WHERE s.tenant_id = $1 AND s.project_id = $2 AND ($3::bigint IS NULL OR s.stream_id > $3)
ORDER BY s.stream_id
LIMIT $4
