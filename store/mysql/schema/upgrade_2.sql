-- From schema version 1 to 2: ordered claims. idx_key finds each key's
-- oldest pending record.

-- step: outbox index idx_key
ALTER TABLE {outbox} ADD INDEX idx_key (status, event_key, id), ALGORITHM=INPLACE, LOCK=NONE;
