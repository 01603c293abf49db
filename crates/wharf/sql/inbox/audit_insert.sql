-- Appends ingest audit rows (one array element per decision) and returns the stream's cursor as
-- it stands in this transaction (0 when the stream does not exist), so a refusal can answer its
-- acknowledged sequence in the same round trip. Never the credential, signature or payload.
-- Nothing is appended when the credential $12 is no longer live (revoked since the request was
-- authenticated from the cache): the request is then unauthenticated, and unaudited.
-- $1 tenant, $2 project (NULL when not a valid identity), $3 actor account, $4 actor device,
-- $5 producer kind, $6 producer id; arrays: $7 event id SHA-256 hex (NULL when unknown),
-- $8 sequence (text, NULL when unknown), $9 outcome, $10 reason, $11 correlation id;
-- $12 credential id. Returns (live, cursor).
WITH live AS MATERIALIZED (
    SELECT EXISTS (SELECT 1 FROM wharf.inbox_credentials
                   WHERE credential_id = $12 AND revoked_at IS NULL) AS live
), appended AS (
    INSERT INTO wharf.inbox_audit (action, tenant_id, project_id, actor_account, actor_device,
                                   producer_kind, producer_id, event_id_sha256,
                                   producer_sequence, outcome, reason, correlation_id)
    SELECT 'ingest', $1, $2, $3, $4, $5, $6, t.event_id_sha256, t.producer_sequence::numeric,
           t.outcome, t.reason, t.correlation_id
    FROM unnest($7::text[], $8::text[], $9::text[], $10::text[], $11::text[])
         AS t(event_id_sha256, producer_sequence, outcome, reason, correlation_id)
    WHERE (SELECT live FROM live)
)
SELECT (SELECT live FROM live),
       coalesce((SELECT acknowledged_sequence FROM wharf.inbox_streams
                 WHERE tenant_id = $1 AND project_id = $2
                   AND producer_kind = $5 AND producer_id = $6), 0)::text
