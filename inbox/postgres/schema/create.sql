-- outboxrelay PostgreSQL inbox schema version 1: a fresh install.
--
-- {table} is the inbox table's name and "{table}_schema_version" the
-- record of its schema version; {version} is the version. The inbox's
-- indexes are "{table}_pkey" and "{table}_processed_idx".
--
-- One row per message a consumer has processed, written in the
-- transaction of the consumer's handler:
--   consumer is the inbox's consumer name (ASCII, compared bytewise).
--   msg_id is the message ID's UTF-8 bytes: bytea, so that every ID is
--   its own ("a" and "a " are two IDs, no collation folds case or
--   accents) and an ID may hold a NUL, which text cannot. Up to 255
--   characters of up to 4 bytes: 1020 bytes.
--   processed_at is when the handler's transaction finished, on the
--   database clock: its last statement, just before COMMIT, sets it.
--   Retention deletes by it, so the window counts from the commit,
--   however long the handler ran.
--   The primary key is the duplicate check: INSERT … ON CONFLICT DO
--   NOTHING of a (consumer, msg_id) waits for the transaction holding it
--   and inserts nothing once that commits. "{table}_processed_idx" serves
--   retention, one consumer at a time, oldest first.
CREATE TABLE IF NOT EXISTS "{table}" (
  consumer     text COLLATE "C" NOT NULL CHECK (octet_length(consumer) BETWEEN 1 AND 64),
  msg_id       bytea NOT NULL CHECK (octet_length(msg_id) BETWEEN 1 AND 1020),
  processed_at timestamptz NOT NULL,
  CONSTRAINT "{table}_pkey" PRIMARY KEY (consumer, msg_id)
);

CREATE INDEX IF NOT EXISTS "{table}_processed_idx" ON "{table}" (consumer, processed_at);

-- The schema versions applied to the table, one row each; the highest
-- is the table's version.
CREATE TABLE IF NOT EXISTS "{table}_schema_version" (
  version    integer NOT NULL PRIMARY KEY,
  applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

INSERT INTO "{table}_schema_version" (version) VALUES ({version}) ON CONFLICT (version) DO NOTHING;
