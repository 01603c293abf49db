-- Moves a locked stream's cursor through every retained sequence that is now contiguous with
-- it, and returns the new cursor. Done here rather than in Rust because the retained sequences
-- ahead of a gap can be many; shipping them out only to find the end of the first run would cost
-- more than the window function. Rows ahead of the cursor are numbered in order: the n-th one
-- continues the run exactly when it equals cursor + n.
UPDATE wharf.inbox_streams s
SET acknowledged_sequence = (
        SELECT coalesce(max(ahead.seq), s.acknowledged_sequence)
        FROM (SELECT i.producer_sequence AS seq,
                     row_number() OVER (ORDER BY i.producer_sequence) AS n
              FROM wharf.inbox_identities i
              WHERE i.stream_id = s.stream_id
                AND i.producer_sequence > s.acknowledged_sequence) AS ahead
        WHERE ahead.seq = s.acknowledged_sequence + ahead.n),
    updated_at = now()
WHERE s.stream_id = $1
RETURNING s.acknowledged_sequence::text
