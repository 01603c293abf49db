-- Retained sequences just beyond a locked stream's cursor, ascending, for the pure cursor walk
-- (wharf_core::inbox::advance_cursor). Only sequences in cursor+1 ..= cursor+$3 can continue the
-- run, so the range bound keeps the read (and the index scan) to at most $3 rows.
-- $1 stream, $2 cursor (text), $3 rows at most.
SELECT producer_sequence::text
FROM wharf.inbox_identities
WHERE stream_id = $1
  AND producer_sequence > $2::text::numeric
  AND producer_sequence <= $2::text::numeric + $3
ORDER BY producer_sequence
LIMIT $3
