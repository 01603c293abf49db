-- Whether one address digest is on the suppression list.
SELECT EXISTS (SELECT 1 FROM wharf.email_suppression WHERE address_sha256 = $1)
