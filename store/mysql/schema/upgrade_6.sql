-- From schema version 5 to 6: narrower state columns, so that a claim
-- and an outcome log fewer bytes. status becomes an ENUM (one byte in
-- the row and in idx_due and idx_key, against nine) and the lease token
-- a BIGINT in lease_id (eight bytes, against sixteen): measured on
-- MariaDB 10.11, about 33 bytes less redo per delivered record.
-- Leases held during the upgrade are kept: lease_id holds the 16 hex
-- digits of a worker's lease as a number (its top bit cleared, its
-- lowest set, so that it is positive and never 0), and a writer's lease
-- (a head start: 'h' and 15 hex digits) as a negative number; the store
-- maps a token to the same number when it settles.
-- The lease column stays, no longer written or read, so that a store of
-- version 5 still running during a rolling deploy can still enqueue (its
-- INSERT names the column); its claims are not fenced against version
-- 6's meanwhile (a record either claims may be delivered twice, none is
-- lost). A later version drops it.
-- Changing status's type rebuilds the table (a copy, which blocks writes
-- to it while it runs): on a large table, run it in a quiet hour, or
-- apply the same change with an online schema tool (gh-ost,
-- pt-online-schema-change) first.

-- step: outbox column lease_id
ALTER TABLE {outbox} ADD COLUMN lease_id BIGINT NOT NULL DEFAULT 0, ALGORITHM=INSTANT;

-- step: outbox copy of lease
UPDATE {outbox} SET lease_id = COALESCE(IF(lease LIKE 'h%', -1 - CAST(CONV(SUBSTRING(lease, 2), 16, 10) AS SIGNED), (CAST(CONV(lease, 16, 10) AS UNSIGNED) & 9223372036854775807) | 1), 1) WHERE {batch} AND lease <> '' AND lease_id = 0;

-- step: outbox type of status
ALTER TABLE {outbox} MODIFY status ENUM('pending', 'published', 'dead') CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending', ALGORITHM=COPY, LOCK=SHARED;

-- step: consumption column lease_id
ALTER TABLE {consumption} ADD COLUMN lease_id BIGINT NOT NULL DEFAULT 0, ALGORITHM=INSTANT;

-- step: consumption copy of lease
UPDATE {consumption} SET lease_id = COALESCE(IF(lease LIKE 'h%', -1 - CAST(CONV(SUBSTRING(lease, 2), 16, 10) AS SIGNED), (CAST(CONV(lease, 16, 10) AS UNSIGNED) & 9223372036854775807) | 1), 1) WHERE {batch} AND lease <> '' AND lease_id = 0;

-- step: consumption type of status
ALTER TABLE {consumption} MODIFY status ENUM('pending', 'published', 'dead') CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending', ALGORITHM=COPY, LOCK=SHARED;
