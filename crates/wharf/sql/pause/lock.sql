-- Serializes pauses and resumes (not the executors' reads: EXCLUSIVE lets ACCESS SHARE pass),
-- so the count checked against the bound is the count written.
LOCK TABLE wharf.kind_pause IN EXCLUSIVE MODE
