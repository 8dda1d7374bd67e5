-- Schema version 3: the outbox is a log that consumers read past a
-- position of their own (see LOG-DESIGN.md). A delivered message costs
-- no write: only a message that needs one (failed, dead, held back
-- behind its key, left by its writer) has a row in {state}, and a claim
-- writes one {ranges} row per batch. Migrate runs this in the
-- transaction that has taken {outbox} and {consumption} (EXCLUSIVE) and
-- found no lease of an older build's worker live: no writer or worker of
-- that build is in flight meanwhile.

-- Delivery state of the messages that need one, per consumer (0: the
-- default consumer).
CREATE TABLE {state} (
	consumer_id     integer NOT NULL,
	seq             bigint NOT NULL,
	event_key       bytea NOT NULL,
	status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'published', 'dead')),
	retry_count     integer NOT NULL DEFAULT 0,
	last_error      text NOT NULL DEFAULT '',
	next_attempt_at timestamptz NOT NULL,
	lease_token     bigint NOT NULL DEFAULT 0,
	finished_at     timestamptz,
	PRIMARY KEY (consumer_id, seq)
);
-- Due records of a consumer: claims read from the front.
CREATE INDEX {prefix}_s_due ON {state} (consumer_id, next_attempt_at, seq) WHERE status = 'pending';
-- A consumer's pending records by key: the order gate.
CREATE INDEX {prefix}_s_key ON {state} (consumer_id, event_key, seq) WHERE status = 'pending';
-- Dead letters and retention.
CREATE INDEX {prefix}_s_finished ON {state} (consumer_id, finished_at) WHERE status <> 'pending';
-- Retention: does any consumer still need a message.
CREATE INDEX {prefix}_s_seq ON {state} (seq);

-- Batches read from the log and not yet settled, one row per claim.
CREATE TABLE {ranges} (
	consumer_id integer NOT NULL,
	token       bigint NOT NULL,
	from_xid    xid8 NOT NULL,
	from_seq    bigint NOT NULL,
	to_xid      xid8 NOT NULL,
	to_seq      bigint NOT NULL,
	-- how many of its messages the claim handed out and are not settled
	n           integer NOT NULL,
	owner       text NOT NULL,
	claimed_at  timestamptz NOT NULL DEFAULT statement_timestamp(),
	lease_until timestamptz NOT NULL,
	PRIMARY KEY (consumer_id, token)
);

-- Where each consumer's walk of the log stands: every message at or
-- before (walked_xid, walked_seq) is in a range or done. The default
-- consumer is id 0, named ''.
-- held: the default consumer's messages its walk passed while their
-- writer held them for its after-commit publish (see LOG-DESIGN.md).
ALTER TABLE {consumers} ADD COLUMN walked_xid xid8, ADD COLUMN walked_seq bigint,
	ADD COLUMN held bigint[] NOT NULL DEFAULT '{}';

-- The old build's state, carried over: the default consumer's from the
-- outbox's own columns, the named consumers' from {consumption}. A
-- published message keeps a row only when it had failed before (its
-- attempts and last error stay readable).
INSERT INTO {state} (consumer_id, seq, event_key, status, retry_count, last_error, next_attempt_at, finished_at)
SELECT 0, seq, event_key, status, retry_count, last_error, next_attempt_at, finished_at FROM {outbox}
WHERE status <> 'published' OR retry_count > 0;
INSERT INTO {state} (consumer_id, seq, event_key, status, retry_count, last_error, next_attempt_at, finished_at)
SELECT consumer_id, seq, event_key, status, retry_count, last_error, next_attempt_at, finished_at FROM {consumption}
WHERE status <> 'published' OR retry_count > 0;

-- The default consumer has had every message so far handed (each is
-- published or has a state row): its walk starts below the horizon, so
-- that a transaction still running with a smaller xid, which may write a
-- message later, is not passed; the messages at or above it that are
-- here already get a published row, which the walk skips.
INSERT INTO {consumers} (id, name, start_seq, cursor_xid, cursor_seq, walked_xid, walked_seq)
OVERRIDING SYSTEM VALUE
SELECT 0, '', 0, '0'::xid8, 0, h.h, 0 FROM (SELECT {horizon} AS h) h;
INSERT INTO {state} (consumer_id, seq, event_key, status, next_attempt_at, finished_at)
SELECT 0, o.seq, o.event_key, 'published', statement_timestamp(), statement_timestamp()
FROM {outbox} o, {consumers} c
WHERE c.id = 0 AND o.xid >= c.walked_xid AND o.status = 'published' AND o.retry_count = 0;
-- A named consumer was handed everything up to its cursor.
UPDATE {consumers} SET walked_xid = cursor_xid, walked_seq = cursor_seq WHERE id <> 0;
ALTER TABLE {consumers} ALTER COLUMN walked_xid SET NOT NULL, ALTER COLUMN walked_seq SET NOT NULL,
	DROP COLUMN cursor_xid, DROP COLUMN cursor_seq;
DROP TABLE {consumption};

-- The outbox keeps the messages only: nothing a delivery changes. A
-- writer's after-commit publish holds its messages under writer_token
-- until writer_until; writer_until NULL with a token: the writer
-- delivered them to the default consumer.
ALTER TABLE {outbox}
	DROP COLUMN status, DROP COLUMN retry_count, DROP COLUMN last_error,
	DROP COLUMN next_attempt_at, DROP COLUMN lease_token, DROP COLUMN finished_at,
	DROP COLUMN available_at,
	ADD COLUMN writer_token bigint NOT NULL DEFAULT 0,
	ADD COLUMN writer_until timestamptz;
-- (dropping the columns dropped the partial indexes over them: _due,
-- _key, _unkeyed, _leased, _finished)
-- Retention walks the log by age.
CREATE INDEX {prefix}_created ON {outbox} (created_at);

COMMENT ON TABLE {outbox} IS 'outboxrelay outbox, schema version 3';
