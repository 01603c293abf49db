-- How many pauses are in force.
SELECT count(*) FROM wharf.kind_pause
