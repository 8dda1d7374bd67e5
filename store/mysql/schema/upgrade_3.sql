-- From schema version 2 to 3: named consumers. The outbox table gets the
-- fanout mark and its index; the registry and the consumers' delivery
-- state get tables of their own.

-- step: outbox column fanout
ALTER TABLE {outbox} ADD COLUMN fanout TINYINT UNSIGNED NOT NULL DEFAULT 0, ALGORITHM=INSTANT;

-- step: outbox index idx_fanout
ALTER TABLE {outbox} ADD INDEX idx_fanout (fanout, id), ALGORITHM=INPLACE, LOCK=NONE;

-- step: consumers table
CREATE TABLE IF NOT EXISTS {consumers} (
  name            VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  start_seq       BIGINT UNSIGNED NOT NULL,
  backfill_cursor BIGINT UNSIGNED NULL,
  created_at      DATETIME(6) NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- step: consumption table
CREATE TABLE IF NOT EXISTS {consumption} (
  consumer        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  msg_id          BIGINT UNSIGNED NOT NULL,
  event_id        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  event_key       VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  event_type      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  status          VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending',
  retry_count     INT UNSIGNED NOT NULL DEFAULT 0,
  last_error      VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  created_at      DATETIME(6) NOT NULL,
  next_attempt_at DATETIME(6) NOT NULL,
  published_at    DATETIME(6) NULL,
  lease_owner     VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  lease_token     CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  PRIMARY KEY (consumer, msg_id),
  UNIQUE KEY uk_event_id (consumer, event_id),
  KEY idx_due (consumer, status, next_attempt_at, msg_id),
  KEY idx_key (consumer, status, event_key, msg_id),
  KEY idx_msg (msg_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
