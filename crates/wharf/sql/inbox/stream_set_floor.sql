-- Operator advance-floor: raises a locked stream's replay floor to $2 (the caller checked it).
UPDATE wharf.inbox_streams
SET replay_floor = $2::text::numeric, updated_at = now()
WHERE stream_id = $1
