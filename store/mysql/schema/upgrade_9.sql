-- From schema version 8 to 9: the outbox becomes a log that each
-- consumer reads past a position of its own (LOG-DESIGN.md). A delivery
-- no longer writes the message's row: a batch is one {ranges} row, and
-- only a message that needs one (failed, released, held back, dead) gets
-- a {state} row. Named consumers read the same log: the hand-over and
-- the {consumption} table go.
--
-- The upgrade stops for workers of version 8: it refuses to cut over
-- while a record is leased (lease_until in the future), and a version 8
-- worker fails on the version 9 tables. Stop them, run Migrate, start the
-- version 9 workers. Writers of version 8 may run during the steps before
-- the cut-over, which locks the tables for its last part (a short
-- LOCK TABLES: it waits for the transactions that wrote to them), not
-- after it: their INSERT names columns version 9 drops.

-- step: ranges table
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

-- step: state table
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

-- step: gaps table
CREATE TABLE IF NOT EXISTS {gaps} (
  consumer_id     INT UNSIGNED NOT NULL,
  lo              BIGINT UNSIGNED NOT NULL,
  hi              BIGINT UNSIGNED NOT NULL,
  seen_at         DATETIME(6) NOT NULL,
  passed_at       DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:01',
  PRIMARY KEY (consumer_id, lo)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- step: outbox column writer_token
ALTER TABLE {outbox} ADD COLUMN writer_token BIGINT NOT NULL DEFAULT 0, ALGORITHM=INSTANT;

-- step: outbox column writer_until
ALTER TABLE {outbox} ADD COLUMN writer_until DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:01', ALGORITHM=INSTANT;

-- step: consumers column id
ALTER TABLE {consumers} ADD COLUMN id INT UNSIGNED NOT NULL DEFAULT 0, ALGORITHM=INSTANT;

-- step: consumers column walked
ALTER TABLE {consumers} ADD COLUMN walked BIGINT UNSIGNED NOT NULL DEFAULT 0, ALGORITHM=INSTANT;

-- step: consumers column held
ALTER TABLE {consumers} ADD COLUMN held VARBINARY(8192) NOT NULL DEFAULT '', ALGORITHM=INSTANT;

-- The cut-over: the delivery state of version 8 becomes positions and
-- state rows (Store.cutOver runs it; SchemaSQL prints what it does).
-- step: outbox copy of status
{cut-over};

-- step: consumers index uk_name
ALTER TABLE {consumers} DROP PRIMARY KEY, ADD PRIMARY KEY (id), ADD UNIQUE KEY uk_name (name), ALGORITHM=INPLACE, LOCK=NONE;

-- step: consumers no column backfill_cursor
ALTER TABLE {consumers} DROP COLUMN backfill_cursor, ALGORITHM=INSTANT;

-- step: outbox no index idx_due
ALTER TABLE {outbox} DROP INDEX idx_due, ALGORITHM=INPLACE, LOCK=NONE;

-- step: outbox no index idx_status_key
ALTER TABLE {outbox} DROP INDEX idx_status_key, ALGORITHM=INPLACE, LOCK=NONE;

-- step: outbox no index idx_fanout
ALTER TABLE {outbox} DROP INDEX idx_fanout, ALGORITHM=INPLACE, LOCK=NONE;

-- step: outbox no column status
ALTER TABLE {outbox} DROP COLUMN status, ALGORITHM=INSTANT;

-- step: outbox no column retry_count
ALTER TABLE {outbox} DROP COLUMN retry_count, ALGORITHM=INSTANT;

-- step: outbox no column last_error
ALTER TABLE {outbox} DROP COLUMN last_error, ALGORITHM=INSTANT;

-- step: outbox no column next_attempt_at
ALTER TABLE {outbox} DROP COLUMN next_attempt_at, ALGORITHM=INSTANT;

-- step: outbox no column fanout
ALTER TABLE {outbox} DROP COLUMN fanout, ALGORITHM=INSTANT;

-- step: outbox no column lease_id
ALTER TABLE {outbox} DROP COLUMN lease_id, ALGORITHM=INSTANT;

-- step: outbox no column lease_until
ALTER TABLE {outbox} DROP COLUMN lease_until, ALGORITHM=INSTANT;

-- step: consumption no table
DROP TABLE IF EXISTS {consumption};
