-- The keys an ingest request names, in the verified (tenant, project) scope only, with the
-- database clock so the replay window is judged by the same clock that wrote retired_at.
SELECT key_id, public_key, state, retired_at, replay_window_seconds, now() AS now
FROM wharf.inbox_keys
WHERE tenant_id = $1 AND project_id = $2 AND key_id = ANY($3::text[])
