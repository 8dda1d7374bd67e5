-- Schema version 2: a key's messages by (transaction ID, seq), so that
-- an ordered claim of a named consumer can tell whether an older message
-- of a key is still waiting for hand-over (hand-over goes in
-- transaction-ID order, a key's messages are in seq order; see
-- docs/postgres-store.md). CREATE INDEX blocks writers of the table
-- while it builds; on a large table, build it first with
-- CREATE INDEX CONCURRENTLY under the same name (Migrate then finds it).
CREATE INDEX IF NOT EXISTS {prefix}_key_xid ON {outbox} (event_key, xid, seq);

COMMENT ON TABLE {outbox} IS 'outboxrelay outbox, schema version 2';
