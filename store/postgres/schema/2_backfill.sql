-- Schema version 2: where a consumer added with StartBeginning ends its
-- backfill (the last seq when it was added; 0 for StartNow), so that
-- Consumers can tell that it is still being handed older messages.
ALTER TABLE {consumers} ADD COLUMN IF NOT EXISTS backfill_until bigint NOT NULL DEFAULT 0;

COMMENT ON TABLE {outbox} IS 'outboxrelay outbox, schema version 2';
