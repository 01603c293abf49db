-- A lone envelope's store when its stream is as its sequence presumes, in one round trip: see
-- migrations/0019_inbox_presumed_store.sql, which defines the function and why it is one.
-- Run it outside a transaction: its commit is the answer's. True when it stored the envelope,
-- false when the stream is not as presumed (nothing written).
-- $1 tenant, $2 project, $3 producer kind, $4 producer id (the stream's key, and the key's
-- scope); $5 event id, $6 idempotency key, $7 sequence (text; u64), $8 content digest,
-- $9 event type, $10 key id, $11 outcome, $12 correlation id, $13 occurred_at, $14 payload
-- (canonical JSON text); $15 credential id, $16 the public key that verified the envelope;
-- audit: $17 tenant, $18 project, $19 actor account, $20 actor device, $21 event id SHA-256
-- hex, $22 outcome, $23 reason (its producer, sequence and correlation id are the envelope's).
SELECT wharf.inbox_store_presumed($1::text, $2::text, $3::text, $4::text, $5::text, $6::text,
                                  $7::text::numeric, $8::bytea, $9::text, $10::text, $11::text,
                                  $12::text, $13::text, $14::text::jsonb, $15::bigint,
                                  $16::bytea, $17::text, $18::text, $19::text, $20::text,
                                  $21::text, $22::text, $23::text)
