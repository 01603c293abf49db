-- Takes the next producer_sequence of one receiver stream (tenant, project, destination) and
-- the database clock. The row stays locked until the emitting transaction ends, so concurrent
-- emits into one stream take their numbers in commit order, and a rolled-back emit gives its
-- number back.
-- $1 tenant, $2 project, $3 destination URL.
INSERT INTO wharf.outbound_sequences (tenant_id, project_id, destination_url, last_sequence)
VALUES ($1, $2, $3, 1)
ON CONFLICT (tenant_id, project_id, destination_url)
DO UPDATE SET last_sequence = wharf.outbound_sequences.last_sequence + 1, updated_at = now()
RETURNING last_sequence, clock_timestamp() AS now
