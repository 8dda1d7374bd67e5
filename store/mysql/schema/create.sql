-- outboxrelay schema version 9: a fresh install.
--
-- The outbox is a log that each consumer reads past a position of its
-- own (LOG-DESIGN.md). {outbox} holds the messages and is written once
-- per message; a delivery changes nothing in it. {consumers} is the
-- registry of consumers (the default one is id 0) with each one's
-- position; {ranges} the batches handed out and not yet settled;
-- {state} a row per consumer and message only for a message that needs
-- one (failed, released, held back behind its key, dead, or left by its
-- writer); {gaps} the ids the log skipped (a rolled-back or failed
-- insert) since they were first seen. outboxctl schema --table NAME
-- prints this file with the names filled in.
--
-- The outbox table:
--   id orders the log; a consumer reads past the highest id it has
--   walked.
--   event_key is binary: compared byte by byte, which for UTF-8 is code
--   point order, with no padding.
--   created_at is when the row was written, on the database clock;
--   occurred_at is Message.CreatedAt when the writer set one.
--   writer_token and writer_until are the writer's head start: the
--   token of the process that enqueued the message with one (0: none)
--   and when it ends; '1970-01-01 00:00:01' once the writer delivered
--   it (or none). Both are fixed-width and NOT NULL, so that the
--   writer's settle rewrites the row in place.
-- All times are UTC on the database clock (UTC_TIMESTAMP).
CREATE TABLE IF NOT EXISTS {outbox} (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  event_id        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  event_key       VARBINARY(1020) NOT NULL DEFAULT '',
  event_type      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  payload         LONGBLOB NOT NULL,
  headers         TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  occurred_at     DATETIME(6) NULL,
  created_at      DATETIME(6) NOT NULL,
  writer_token    BIGINT NOT NULL DEFAULT 0,
  writer_until    DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:01',
  PRIMARY KEY (id),
  UNIQUE KEY uk_event_id (event_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The consumers. id 0 (name '') is the default consumer. walked is the
-- position: every message with an id up to it has been handed to a
-- range, has a state row, or is not the consumer's. start_seq is the
-- last message before the consumer's first. held lists (8 bytes each,
-- big-endian) the messages the default consumer's walk passed while
-- their writer held them (writer_until in the future). removing is 1
-- from the moment RemoveConsumer starts until its state is gone;
-- add_token is the AddConsumer call that registered it.
CREATE TABLE IF NOT EXISTS {consumers} (
  id              INT UNSIGNED NOT NULL,
  name            VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  walked          BIGINT UNSIGNED NOT NULL DEFAULT 0,
  start_seq       BIGINT UNSIGNED NOT NULL DEFAULT 0,
  held            VARBINARY(8192) NOT NULL DEFAULT '',
  created_at      DATETIME(6) NOT NULL,
  removing        TINYINT UNSIGNED NOT NULL DEFAULT 0,
  add_token       CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT IGNORE INTO {consumers} (id, name, created_at) VALUES (0, '', UTC_TIMESTAMP(6));

-- One row per batch read from the log and not yet settled: the messages
-- with from_id < id <= to_id that have no state row (and, for the
-- default consumer, that their writer did not deliver), n of them still
-- unsettled, leased to owner until lease_until.
CREATE TABLE IF NOT EXISTS {ranges} (
  consumer_id     INT UNSIGNED NOT NULL,
  token           BIGINT NOT NULL,
  from_id         BIGINT UNSIGNED NOT NULL,
  to_id           BIGINT UNSIGNED NOT NULL,
  n               INT UNSIGNED NOT NULL,
  owner           VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  claimed_at      DATETIME(6) NOT NULL,
  lease_until     DATETIME(6) NOT NULL,
  PRIMARY KEY (consumer_id, token)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- A consumer's state of a message that needs one. status pending: due
-- at next_attempt_at (while lease_token is not 0, leased until then);
-- published or dead since finished_at.
--   idx_due serves claims, idx_key the order per key, idx_finished
--   retention and idx_id the state of a message for every consumer.
CREATE TABLE IF NOT EXISTS {state} (
  consumer_id     INT UNSIGNED NOT NULL,
  id              BIGINT UNSIGNED NOT NULL,
  event_key       VARBINARY(1020) NOT NULL DEFAULT '',
  status          ENUM('pending', 'published', 'dead') CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending',
  retry_count     INT UNSIGNED NOT NULL DEFAULT 0,
  last_error      VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  next_attempt_at DATETIME(6) NOT NULL,
  lease_token     BIGINT NOT NULL DEFAULT 0,
  finished_at     DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:01',
  PRIMARY KEY (consumer_id, id),
  KEY idx_due (consumer_id, status, next_attempt_at, id),
  KEY idx_key (consumer_id, status, event_key, id),
  KEY idx_finished (consumer_id, status, finished_at),
  KEY idx_id (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Runs of ids missing from the log with a later id committed, per
-- consumer that met them: lo to hi, first seen missing at seen_at,
-- passed by the consumer's walk at passed_at ('1970-01-01 00:00:01':
-- not yet).
CREATE TABLE IF NOT EXISTS {gaps} (
  consumer_id     INT UNSIGNED NOT NULL,
  lo              BIGINT UNSIGNED NOT NULL,
  hi              BIGINT UNSIGNED NOT NULL,
  seen_at         DATETIME(6) NOT NULL,
  passed_at       DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:01',
  PRIMARY KEY (consumer_id, lo)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
