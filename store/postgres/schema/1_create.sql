-- Schema version 1 of an outboxrelay PostgreSQL outbox: the outbox table,
-- its named consumers' registry and their delivery state. Index names
-- start with the outbox table's name.

-- The outbox table: the messages, and the delivery state of the default
-- consumer. seq is the order of the inserts; xid is the inserting
-- transaction, which decides when named consumers may be handed a message
-- (see docs/postgres-store.md). event_key and event_type are bytea, so
-- that any key or type (NUL included) is kept byte for byte and compares
-- byte for byte.
CREATE TABLE IF NOT EXISTS {outbox} (
	seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	event_id        text COLLATE "C" NOT NULL,
	event_key       bytea NOT NULL DEFAULT '\x',
	event_type      bytea NOT NULL,
	payload         bytea NOT NULL,
	headers         jsonb,
	occurred_at     timestamptz,
	xid             xid8 NOT NULL DEFAULT pg_current_xact_id(),
	created_at      timestamptz NOT NULL DEFAULT statement_timestamp(),
	available_at    timestamptz NOT NULL DEFAULT statement_timestamp(),
	status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'published', 'dead')),
	retry_count     integer NOT NULL DEFAULT 0,
	last_error      text NOT NULL DEFAULT '',
	next_attempt_at timestamptz NOT NULL DEFAULT statement_timestamp(),
	lease_token     bigint NOT NULL DEFAULT 0,
	finished_at     timestamptz
);
CREATE UNIQUE INDEX IF NOT EXISTS {prefix}_event_id ON {outbox} (event_id);
-- Due records, pending only: a claim reads from the front.
CREATE INDEX IF NOT EXISTS {prefix}_due ON {outbox} (next_attempt_at, seq) WHERE status = 'pending';
-- Keyed pending records: ordered claims walk the keys' heads.
CREATE INDEX IF NOT EXISTS {prefix}_key ON {outbox} (event_key, seq) WHERE status = 'pending';
-- Unkeyed pending records, for ordered claims.
CREATE INDEX IF NOT EXISTS {prefix}_unkeyed ON {outbox} (next_attempt_at, seq) WHERE status = 'pending' AND event_key = '\x';
-- Records a worker holds (or held until its lease ran out).
CREATE INDEX IF NOT EXISTS {prefix}_leased ON {outbox} (event_key) WHERE status = 'pending' AND lease_token > 0;
-- The hand-over to named consumers walks (xid, seq).
CREATE INDEX IF NOT EXISTS {prefix}_xid ON {outbox} (xid, seq);
-- Retention and dead letters.
CREATE INDEX IF NOT EXISTS {prefix}_finished ON {outbox} (finished_at) WHERE status <> 'pending';

-- Named consumers: where each one's hand-over stands.
CREATE TABLE IF NOT EXISTS {consumers} (
	id          integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name        text COLLATE "C" NOT NULL UNIQUE,
	start_seq   bigint NOT NULL,
	cursor_xid  xid8 NOT NULL,
	cursor_seq  bigint NOT NULL,
	created_at  timestamptz NOT NULL DEFAULT statement_timestamp(),
	removing    boolean NOT NULL DEFAULT false
);

-- Named consumers' delivery state, one row per consumer and message.
CREATE TABLE IF NOT EXISTS {consumption} (
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
CREATE INDEX IF NOT EXISTS {prefix}_c_due ON {consumption} (consumer_id, next_attempt_at, seq) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS {prefix}_c_key ON {consumption} (consumer_id, event_key, seq) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS {prefix}_c_unkeyed ON {consumption} (consumer_id, next_attempt_at, seq) WHERE status = 'pending' AND event_key = '\x';
CREATE INDEX IF NOT EXISTS {prefix}_c_leased ON {consumption} (consumer_id, event_key) WHERE status = 'pending' AND lease_token > 0;
CREATE INDEX IF NOT EXISTS {prefix}_c_finished ON {consumption} (consumer_id, finished_at) WHERE status <> 'pending';
CREATE INDEX IF NOT EXISTS {prefix}_c_seq ON {consumption} (seq);

COMMENT ON TABLE {outbox} IS 'outboxrelay outbox, schema version 1';
