-- outboxrelay schema version 8: a fresh install.
--
-- {outbox} is the outbox table, {consumers} and {consumption} its
-- companion tables for named consumers (<table>_consumers and
-- <table>_consumption), and {schema_version} the record of the schema
-- version (<table>_schema_version). outboxctl schema --table NAME prints
-- this file with the names filled in.
--
-- The outbox table:
--   id orders records in insert order and is the claim tie-breaker.
--   event_key is binary: compared byte by byte, which for UTF-8 is code
--   point order, with no padding, so that every key sorts and compares as
--   itself.
--   created_at is when the row was written, on the database clock;
--   occurred_at is Message.CreatedAt when the writer set one.
--   next_attempt_at is when a pending record is next due: for a leased
--   record, when its lease ends. For a published or dead record it is
--   when that outcome was recorded, so idx_due also serves retention.
--   idx_due (status, next_attempt_at, id) serves the claim: a range scan
--   over due pending records in due order that stops after the batch.
--   A claim moves the records it leases past the range (to the lease's
--   end), so that the next claims, on any instance, do not read them.
--   idx_status_key (status, event_key, id) finds each key's oldest
--   pending record with a loose index scan, for ordered claims, and a
--   key's records for filters.
--   lease_id identifies a record's current (or last) lease, 0 when
--   none: it fences settles, so that only the holder of the current
--   lease of a pending record can record an outcome. A worker's lease
--   is positive; a writer's lease (a head start) is negative, and so is
--   a requeued record's wait for the record of its key in flight (see
--   Requeue). lease_until is when a claim's lease ends (a claim writes
--   it and next_attempt_at; builds before issue 30 wrote only
--   lease_until); a head start ends at next_attempt_at.
--   status, lease_id, lease_until, next_attempt_at and retry_count are
--   fixed-width and NOT NULL, so that a claim and a published outcome
--   rewrite the row in place: InnoDB then logs only the bytes that
--   changed, not the whole row with its payload. status is an ENUM (one
--   byte, in the row and in the indexes), and lease_id a BIGINT (eight
--   bytes), the narrowest that hold them. A published record's
--   publication time is its next_attempt_at.
--   fanout is 1 once the message has been handed over to the named
--   consumers; idx_fanout finds the ones still to hand over.
-- All times are UTC on the database clock (UTC_TIMESTAMP).
CREATE TABLE IF NOT EXISTS {outbox} (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  event_id        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  event_key       VARBINARY(1020) NOT NULL DEFAULT '',
  event_type      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  payload         LONGBLOB NOT NULL,
  headers         TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  occurred_at     DATETIME(6) NULL,
  status          ENUM('pending', 'published', 'dead') CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending',
  retry_count     INT UNSIGNED NOT NULL DEFAULT 0,
  last_error      VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  created_at      DATETIME(6) NOT NULL,
  next_attempt_at DATETIME(6) NOT NULL,
  fanout          TINYINT UNSIGNED NOT NULL DEFAULT 0,
  lease_id        BIGINT NOT NULL DEFAULT 0,
  lease_until     DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:01',
  PRIMARY KEY (id),
  UNIQUE KEY uk_event_id (event_id),
  KEY idx_due (status, next_attempt_at, id),
  KEY idx_status_key (status, event_key, id),
  KEY idx_fanout (fanout, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The named consumers. start_seq is the first message (outbox id) a
-- consumer gets; backfill_cursor, while not NULL, is how far a consumer
-- that started from the beginning has been handed the messages that
-- existed before it. removing is 1 from the moment RemoveConsumer starts
-- until its state is gone; add_token is the AddConsumer call that
-- registered it.
CREATE TABLE IF NOT EXISTS {consumers} (
  name            VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  start_seq       BIGINT UNSIGNED NOT NULL,
  backfill_cursor BIGINT UNSIGNED NULL,
  created_at      DATETIME(6) NOT NULL,
  removing        TINYINT UNSIGNED NOT NULL DEFAULT 0,
  add_token       CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The delivery state of the named consumers, one row per consumer and
-- message, with the state columns of the outbox table and the message
-- fields claims need (the payload stays in the outbox table). Its indexes
-- mirror the outbox table's, prefixed by the consumer: idx_key (consumer,
-- status, event_key, msg_id) is the outbox table's idx_status_key;
-- idx_msg serves retention.
CREATE TABLE IF NOT EXISTS {consumption} (
  consumer        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  msg_id          BIGINT UNSIGNED NOT NULL,
  event_id        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  event_key       VARBINARY(1020) NOT NULL DEFAULT '',
  event_type      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  status          ENUM('pending', 'published', 'dead') CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending',
  retry_count     INT UNSIGNED NOT NULL DEFAULT 0,
  last_error      VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  created_at      DATETIME(6) NOT NULL,
  next_attempt_at DATETIME(6) NOT NULL,
  lease_id        BIGINT NOT NULL DEFAULT 0,
  lease_until     DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:01',
  PRIMARY KEY (consumer, msg_id),
  UNIQUE KEY uk_event_id (consumer, event_id),
  KEY idx_due (consumer, status, next_attempt_at, msg_id),
  KEY idx_key (consumer, status, event_key, msg_id),
  KEY idx_msg (msg_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
