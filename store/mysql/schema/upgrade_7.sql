-- From schema version 6 to 7: a published or dead outcome no longer
-- moves the record in an index of ordered claims. idx_key (status,
-- event_key, id) moved with every outcome, ordered claims or not: about
-- 80 bytes of redo per delivered record, a quarter of the total. It is
-- replaced by idx_head (key_state, event_key, id): key_state is 'pending'
-- while the record counts for its key's order, and only ordered claims
-- write it ('done', once the record is published or dead). A record whose
-- status is no longer pending but whose key_state still is (published by
-- an unordered claim, or by a writer's head start) is passed over, and
-- marked 'done', by the next ordered claim that meets it.
-- The rule the store keeps: a pending record has key_state 'pending'.
-- Enqueue gets it by default; a requeue sets both.
-- During a rolling deploy, a store of version 6 still running enqueues,
-- claims and settles as before (its ordered claims read without the
-- index, more slowly). It must not requeue dead letters once this
-- upgrade has run: its requeue does not set key_state, and an ordered
-- claim would then pass over the requeued record.

-- step: outbox column key_state
ALTER TABLE {outbox} ADD COLUMN key_state ENUM('pending', 'done') CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending', ALGORITHM=INSTANT;

-- step: outbox copy of status
UPDATE {outbox} SET key_state = 'done' WHERE {batch} AND status <> 'pending' AND key_state = 'pending';

-- step: outbox index idx_head
ALTER TABLE {outbox} ADD INDEX idx_head (key_state, event_key, id), ALGORITHM=INPLACE, LOCK=NONE;

-- step: outbox no index idx_key
ALTER TABLE {outbox} DROP INDEX idx_key, ALGORITHM=INPLACE, LOCK=NONE;
