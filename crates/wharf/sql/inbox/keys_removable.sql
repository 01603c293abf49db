-- Revoked keys none of whose accepted envelopes can be replayed (the condition of
-- key_replayable.sql, as NOT EXISTS), longest revoked first. $1 bigint: at most this many.
SELECT k.tenant_id::text, k.project_id::text, k.key_id
  FROM wharf.inbox_keys k
 WHERE k.state = 'revoked'
   AND NOT EXISTS (
        SELECT 1
          FROM wharf.inbox_identities i
          JOIN wharf.inbox_streams s ON s.stream_id = i.stream_id
         WHERE i.key_id = k.key_id AND s.tenant_id = k.tenant_id AND s.project_id = k.project_id
           AND i.producer_sequence >= s.replay_floor
           AND (EXISTS (SELECT 1 FROM wharf.inbox_payloads p WHERE p.identity_id = i.identity_id)
                OR i.accepted_at > now() - k.replay_window_seconds * interval '1 second'))
 ORDER BY k.revoked_at, k.tenant_id, k.project_id, k.key_id
 LIMIT $1
