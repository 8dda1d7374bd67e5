-- From schema version 3 to 4: binary keys, the writer's timestamp, and
-- safe consumer removal. Changing event_key's type rebuilds the table (a
-- copy on both MySQL and MariaDB, which blocks writes to it while it
-- runs): on a large table, run it in a quiet hour, or apply the same
-- change with an online schema tool (gh-ost, pt-online-schema-change)
-- first.

-- step: outbox column occurred_at
ALTER TABLE {outbox} ADD COLUMN occurred_at DATETIME(6) NULL, ALGORITHM=INSTANT;

-- step: outbox type of event_key
ALTER TABLE {outbox} MODIFY event_key VARBINARY(1020) NOT NULL DEFAULT '', ALGORITHM=COPY, LOCK=SHARED;

-- step: consumption type of event_key
ALTER TABLE {consumption} MODIFY event_key VARBINARY(1020) NOT NULL DEFAULT '', ALGORITHM=COPY, LOCK=SHARED;

-- step: consumers column removing
ALTER TABLE {consumers} ADD COLUMN removing TINYINT UNSIGNED NOT NULL DEFAULT 0, ALGORITHM=INSTANT;

-- step: consumers column add_token
ALTER TABLE {consumers} ADD COLUMN add_token CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL, ALGORITHM=INSTANT;
