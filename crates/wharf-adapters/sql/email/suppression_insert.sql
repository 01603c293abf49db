-- Adds one address digest to the suppression list; true when it was not there yet.
INSERT INTO wharf.email_suppression (address_sha256)
VALUES ($1)
ON CONFLICT (address_sha256) DO NOTHING
RETURNING true
