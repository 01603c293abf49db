-- Locks a stream row for the rest of the transaction: every decision on a stream is serialised
-- here. Sequences travel as text because they are u64 (numeric(20,0) in the table).
SELECT stream_id, acknowledged_sequence::text, replay_floor::text
FROM wharf.inbox_streams
WHERE tenant_id = $1 AND project_id = $2 AND producer_kind = $3 AND producer_id = $4
FOR UPDATE
