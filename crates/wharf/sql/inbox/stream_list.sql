-- Streams of a tenant and project, with how many accepted identities wait beyond the cursor.
SELECT s.stream_id, s.tenant_id::text, s.project_id::text, s.producer_kind, s.producer_id::text,
       s.acknowledged_sequence::text, s.replay_floor::text, s.created_at, s.updated_at,
       (SELECT count(*) FROM wharf.inbox_identities i
        WHERE i.stream_id = s.stream_id
          AND i.producer_sequence > s.acknowledged_sequence) AS retained_ahead
FROM wharf.inbox_streams s
WHERE s.tenant_id = $1 AND s.project_id = $2
  AND ($3::text IS NULL OR (s.producer_kind = $3 AND s.producer_id = $4))
ORDER BY s.producer_kind, s.producer_id
LIMIT $5
