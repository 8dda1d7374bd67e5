-- outboxrelay inbox schema version 1: a fresh install.
--
-- {table} is the inbox table's name and `{table}_schema_version` the
-- record of its schema version; {version} is the version.
--
-- One row per message a consumer has processed, written in the
-- transaction of the consumer's handler:
--   consumer is the inbox's consumer name; msg_id the message ID, stored
--   binary so that every ID is compared byte by byte, with no padding
--   ("a" and "a " are two IDs) and no case folding.
--   processed_at is when the handler's transaction finished, on the
--   database clock (UTC): its last statement, just before COMMIT, sets it
--   (the INSERT's value is never committed). Retention deletes by it, so
--   the window counts from the commit, however long the handler ran.
--   The primary key is the duplicate check: a second INSERT of a
--   (consumer, msg_id) waits for the transaction holding the first and
--   fails with a duplicate key once it commits. idx_processed serves
--   retention, one consumer at a time.
CREATE TABLE IF NOT EXISTS `{table}` (
  consumer     VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  msg_id       VARBINARY(1020) NOT NULL,
  processed_at DATETIME(6) NOT NULL,
  PRIMARY KEY (consumer, msg_id),
  KEY idx_processed (consumer, processed_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The schema versions applied to the table, one row each; the highest
-- is the table's version.
CREATE TABLE IF NOT EXISTS `{table}_schema_version` (
  version    INT UNSIGNED NOT NULL,
  applied_at DATETIME(6) NOT NULL,
  PRIMARY KEY (version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT IGNORE INTO `{table}_schema_version` (version, applied_at) VALUES ({version}, UTC_TIMESTAMP(6));
