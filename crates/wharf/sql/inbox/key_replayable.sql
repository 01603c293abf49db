-- The envelopes a key accepted that can still be replayed: at or above their stream's replay
-- floor, and either still holding their payload or accepted within the key's replay window.
-- A key is removable only when this counts none. Walks inbox_identities_key.
-- $1 tenant, $2 project, $3 key id, $4 bigint the key's replay window in seconds.
SELECT count(*) AS envelopes,
       count(DISTINCT i.stream_id) AS streams,
       max(i.accepted_at) AS newest_accepted_at
  FROM wharf.inbox_identities i
  JOIN wharf.inbox_streams s ON s.stream_id = i.stream_id
 WHERE i.key_id = $3 AND s.tenant_id = $1 AND s.project_id = $2
   AND i.producer_sequence >= s.replay_floor
   AND (EXISTS (SELECT 1 FROM wharf.inbox_payloads p WHERE p.identity_id = i.identity_id)
        OR i.accepted_at > now() - $4::bigint * interval '1 second')
