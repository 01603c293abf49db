-- Locks every stream one group commit decides on and reads their state (SPEC §3.4 step 7 for
-- several requests at once). Rows are locked in stream_id order, so two group commits (of this
-- or another replica) that share streams take their locks in one order and cannot deadlock.
-- A missing stream returns no row; the caller creates it (group_streams_insert.sql) and locks
-- again. Sequences travel as text (u64 in numeric(20,0)).
-- $1 tenants, $2 projects, $3 producer kinds, $4 producer ids: one element per stream; each row
-- returns its element's 1-based ordinal.
SELECT k.ord, s.stream_id, s.acknowledged_sequence::text, s.replay_floor::text
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY
     AS k(tenant_id, project_id, producer_kind, producer_id, ord)
JOIN wharf.inbox_streams s
  ON s.tenant_id = k.tenant_id AND s.project_id = k.project_id
 AND s.producer_kind = k.producer_kind AND s.producer_id = k.producer_id
ORDER BY s.stream_id
FOR UPDATE OF s
