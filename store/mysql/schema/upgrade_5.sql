-- From schema version 4 to 5: state columns that claims and outcomes
-- rewrite in place. A claim used to grow each row (lease_token and
-- lease_owner from NULL to a value) and a published outcome too
-- (published_at), which made InnoDB rewrite and log the whole row,
-- payload included. Now status is CHAR(9), the lease token and its end
-- live in the fixed-width NOT NULL columns lease and lease_until (a claim
-- no longer moves next_attempt_at, nor so the record in idx_due),
-- lease_owner is gone (the claimer is
-- in the worker's logs, not on each row), lease_token stays NULL, and a
-- published record's publication time is its next_attempt_at (the
-- published_at column is gone). Leases held during the upgrade are kept
-- (lease holds 16 hex digits; a version 4 token fences by its first 16).
-- Changing status's type rebuilds the table (a copy, which blocks writes
-- to it while it runs): on a large table, run it in a quiet hour, or
-- apply the same change with an online schema tool (gh-ost,
-- pt-online-schema-change) first.

-- step: outbox column lease
ALTER TABLE {outbox} ADD COLUMN lease CHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '', ALGORITHM=INSTANT;

-- step: outbox column lease_until
ALTER TABLE {outbox} ADD COLUMN lease_until DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:01', ALGORITHM=INSTANT;

-- step: outbox copy of lease_token
UPDATE {outbox} SET lease = LEFT(lease_token, 16), lease_until = next_attempt_at, lease_token = NULL WHERE {batch} AND lease_token IS NOT NULL;

-- step: outbox copy of published_at
UPDATE {outbox} SET next_attempt_at = published_at WHERE {batch} AND status = 'published' AND published_at IS NOT NULL AND next_attempt_at <> published_at;

-- step: outbox no column published_at
ALTER TABLE {outbox} DROP COLUMN published_at, ALGORITHM=INSTANT;

-- step: outbox no column lease_owner
ALTER TABLE {outbox} DROP COLUMN lease_owner, ALGORITHM=INSTANT;

-- step: outbox type of status
ALTER TABLE {outbox} MODIFY status CHAR(9) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending', ALGORITHM=COPY, LOCK=SHARED;

-- step: consumption column lease
ALTER TABLE {consumption} ADD COLUMN lease CHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '', ALGORITHM=INSTANT;

-- step: consumption column lease_until
ALTER TABLE {consumption} ADD COLUMN lease_until DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:01', ALGORITHM=INSTANT;

-- step: consumption copy of lease_token
UPDATE {consumption} SET lease = LEFT(lease_token, 16), lease_until = next_attempt_at, lease_token = NULL WHERE {batch} AND lease_token IS NOT NULL;

-- step: consumption copy of published_at
UPDATE {consumption} SET next_attempt_at = published_at WHERE {batch} AND status = 'published' AND published_at IS NOT NULL AND next_attempt_at <> published_at;

-- step: consumption no column published_at
ALTER TABLE {consumption} DROP COLUMN published_at, ALGORITHM=INSTANT;

-- step: consumption no column lease_owner
ALTER TABLE {consumption} DROP COLUMN lease_owner, ALGORITHM=INSTANT;

-- step: consumption type of status
ALTER TABLE {consumption} MODIFY status CHAR(9) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending', ALGORITHM=COPY, LOCK=SHARED;
