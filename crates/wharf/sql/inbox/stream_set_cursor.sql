-- Operator skip: moves a locked stream's cursor forward to $2 (the caller checked it is ahead).
UPDATE wharf.inbox_streams
SET acknowledged_sequence = $2::text::numeric, updated_at = now()
WHERE stream_id = $1
