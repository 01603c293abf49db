-- One operator audit trail (issues 13 and 14): every operator action, whether it came from the
-- console, the admin API or the CLI, is a row of wharf.operator_audit, which `wharf audit`,
-- `GET /v1/audit` and the console's audit page all read.
--
-- Owned by `wharf::outbox::operator` (the table) and `wharf::console` (the rows it writes).
--
-- Until now the console wrote its own trail, wharf.console_audit (0050), beside this one (0015).
-- This table is the one kept: it is the one the API and the CLI already read, its ids are the
-- ones earlier API answers (`audit_id`) and `wharf audit --after` cursors name, so none of them
-- changes. The console's rows move here with new ids after the existing ones (their old ids
-- were only the console's own page cursors), in the order they were written, their times kept.
--
-- Two writers, one row shape:
--   * the library, for the operator actions it decides (cancel, resolve, redrive, pause,
--     resume), whoever called it: `role` NULL (the admin API's operator token and the CLI's
--     database access both hold every right), `detail` the states and ids it decided on;
--   * the console, for everything an operator does in it (sign-in and sign-out included, and
--     the actions whose library call writes its own row as well, so the console's row says
--     with which role, on what and with what result, under the same correlation id): `role`
--     the session's, `target` what it was done to, `detail` {"result": …}.
-- Append-only as before (0015's triggers stay): nothing here updates or deletes a row.

ALTER TABLE wharf.operator_audit
    -- NULL: written by the library for its caller; else the console session's role.
    ADD COLUMN role   text CHECK (role IN ('operator', 'read-only')),
    -- What a console action was done to (`action 42`, `kind email tenant acme`, …); NULL for
    -- the library's rows, which name their action in action_id and the rest in detail.
    ADD COLUMN target text CHECK (octet_length(target) <= 512);

-- The library's operations stay a closed list; the console's are its own names, as 0050 bounded
-- them (`sign-in`, `action-admit`, `stream-skip`, …).
ALTER TABLE wharf.operator_audit DROP CONSTRAINT operator_audit_operation_check;
ALTER TABLE wharf.operator_audit ADD CONSTRAINT operator_audit_operation_check
    CHECK (operation IN ('cancel', 'resolve', 'redrive', 'pause', 'resume')
           OR (role IS NOT NULL AND operation ~ '^[a-z][a-z-]{0,63}$'));
-- The library's rows name an action exactly when their operation is about one; a console row
-- names one when it was done to one (admit, refuse, cancel).
ALTER TABLE wharf.operator_audit DROP CONSTRAINT operator_audit_action_named;
ALTER TABLE wharf.operator_audit ADD CONSTRAINT operator_audit_action_named
    CHECK (role IS NOT NULL OR (action_id IS NULL) = (operation IN ('pause', 'resume')));
-- The console bounded correlation ids at 128 bytes (it echoes the request's), the library at 64.
ALTER TABLE wharf.operator_audit DROP CONSTRAINT operator_audit_correlation_id_check;
ALTER TABLE wharf.operator_audit ADD CONSTRAINT operator_audit_correlation_id_check
    CHECK (octet_length(correlation_id) BETWEEN 1 AND 128);

INSERT INTO wharf.operator_audit
    (operation, action_id, actor, role, target, detail, correlation_id, recorded_at)
SELECT action,
       CASE WHEN target ~ '^action [0-9]{1,18}$' THEN substr(target, 8)::bigint END,
       operator::text,
       role,
       target,
       jsonb_build_object('result', detail),
       -- 0050 allowed an empty one; this table never did.
       coalesce(nullif(correlation_id, ''), 'none'),
       recorded_at
FROM wharf.console_audit
ORDER BY audit_id;

-- Its rows are all above. DROP is not refused by its append-only triggers (they guard rows,
-- and TRUNCATE); nothing else reads it.
DROP TABLE wharf.console_audit;
