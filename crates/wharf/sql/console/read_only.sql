-- Makes the caller's transaction a bounded read: read-only, and every statement in it cancelled
-- after $1 milliseconds, so no console page can hold a backend longer than that.
SELECT set_config('statement_timeout', $1::text, true),
       set_config('transaction_read_only', 'on', true)
