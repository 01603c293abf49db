-- Removes one address digest from the suppression list; returns the removed row's digest.
DELETE FROM wharf.email_suppression
WHERE address_sha256 = $1
RETURNING address_sha256
