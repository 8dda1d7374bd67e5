-- From schema version 7 to 8: every column means one thing again, and
-- ordered claims read only pending records, whatever the history.
-- Version 7 found key heads in idx_head (key_state, event_key, id), where
-- key_state was a delayed copy of status that only ordered claims wrote:
-- a record an unordered worker (or a writer's after-commit publish)
-- published kept counting for its key until an ordered claim passed it
-- and marked it, 256 per key per claim. Switching Ordering on over a
-- long unordered history stalled keys for as many claims as their
-- history was long, and made claims read the whole unkeyed history.
-- idx_status_key (status, event_key, id) is the index every outcome
-- keeps exact: a key's oldest pending record is the first entry of
-- ('pending', key). It costs an outcome one more index entry to move
-- (about 70 bytes of redo per delivered record; see BENCHMARKS.md).
-- key_state goes, and so do the vestigial lease (version 5's token,
-- unwritten since version 6) and lease_token (unwritten since version
-- 5) of both tables. Each step is online: an index is built and dropped
-- in place without blocking writes, and a column is dropped instantly
-- where the server can (MariaDB 10.4+, MySQL 8.0.29+), in place
-- otherwise.
-- During a rolling deploy, a store of version 7 still running enqueues,
-- claims without Ordering and settles as before; its ordered claims and
-- its requeues name key_state, fail, and are retried by its worker until
-- it is replaced (nothing is lost: a version 8 worker delivers those
-- records). A version 7 build does not start on version 8 tables.

-- step: outbox index idx_status_key
ALTER TABLE {outbox} ADD INDEX idx_status_key (status, event_key, id), ALGORITHM=INPLACE, LOCK=NONE;

-- step: outbox no index idx_head
ALTER TABLE {outbox} DROP INDEX idx_head, ALGORITHM=INPLACE, LOCK=NONE;

-- step: outbox no column key_state
ALTER TABLE {outbox} DROP COLUMN key_state, ALGORITHM=INSTANT;

-- step: outbox no column lease
ALTER TABLE {outbox} DROP COLUMN lease, ALGORITHM=INSTANT;

-- step: outbox no column lease_token
ALTER TABLE {outbox} DROP COLUMN lease_token, ALGORITHM=INSTANT;

-- step: consumption no column lease
ALTER TABLE {consumption} DROP COLUMN lease, ALGORITHM=INSTANT;

-- step: consumption no column lease_token
ALTER TABLE {consumption} DROP COLUMN lease_token, ALGORITHM=INSTANT;
