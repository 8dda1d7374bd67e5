package mysql

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// deliveryStateColumns are a consumer's delivery state, the same in the
// outbox table (the default consumer) and the consumption table (named
// consumers), so that one set of statements serves both (queries.go).
const deliveryStateColumns = `
  status          VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending',
  retry_count     INT UNSIGNED NOT NULL DEFAULT 0,
  last_error      VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  created_at      DATETIME(6) NOT NULL,
  next_attempt_at DATETIME(6) NOT NULL,
  published_at    DATETIME(6) NULL,
  lease_owner     VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  lease_token     CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,`

// createTable is the outbox table. The seed's column names are kept where
// the seed has them (event_id, event_type, status, retry_count,
// last_error), so operators' queries carry over.
//
//   - id orders records in insert order and is the claim tie-breaker.
//   - next_attempt_at is when a pending record is next due. A claim moves it
//     to the end of the lease, so a leased record leaves the due range and
//     comes back by itself if its worker dies. For a published or dead
//     record it is when that outcome was recorded, so idx_due also serves
//     retention (published records by age).
//   - idx_due (status, next_attempt_at, id) serves the claim: a range scan
//     over due pending records in due order that stops after the batch,
//     whatever the size of the backlog or of the published history.
//   - idx_key (status, event_key, id) finds each key's oldest pending
//     record (its head) with a loose index scan, one read per key, for
//     ordered claims; and serves per-key queries.
//   - lease_token fences settles: only the holder of the current lease
//     can record an outcome.
//   - fanout is 1 once the message has been handed over to the named
//     consumers (consumer.go); idx_fanout finds the ones still to hand
//     over, however long the history.
//
// All times are UTC on the database clock (UTC_TIMESTAMP).
const createTable = "CREATE TABLE IF NOT EXISTS `%s` (" + `
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  event_id        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  event_key       VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  event_type      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  payload         LONGBLOB NOT NULL,
  headers         TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,` + deliveryStateColumns + `
  fanout          TINYINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (id),
  UNIQUE KEY uk_event_id (event_id),
  KEY idx_due (status, next_attempt_at, id),
  KEY idx_key (status, event_key, id),
  KEY idx_fanout (fanout, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`

// createConsumers registers the named consumers of an outbox table.
// start_seq is the first message (outbox id) a consumer gets;
// backfill_cursor, while not NULL, is how far a consumer that started
// from the beginning has been handed the messages that existed before it.
const createConsumers = "CREATE TABLE IF NOT EXISTS `%s` (" + `
  name            VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  start_seq       BIGINT UNSIGNED NOT NULL,
  backfill_cursor BIGINT UNSIGNED NULL,
  created_at      DATETIME(6) NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`

// createConsumption holds the delivery state of the named consumers, one
// row per consumer and message, with the state columns of the outbox
// table and the message fields claims need (the payload stays in the
// outbox table). Its indexes mirror the outbox table's, prefixed by the
// consumer, so each consumer's claims read only its own rows; idx_msg
// serves retention.
const createConsumption = "CREATE TABLE IF NOT EXISTS `%s` (" + `
  consumer        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  msg_id          BIGINT UNSIGNED NOT NULL,
  event_id        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  event_key       VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  event_type      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,` + deliveryStateColumns + `
  PRIMARY KEY (consumer, msg_id),
  UNIQUE KEY uk_event_id (consumer, event_id),
  KEY idx_due (consumer, status, next_attempt_at, msg_id),
  KEY idx_key (consumer, status, event_key, msg_id),
  KEY idx_msg (msg_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`

// consumersTable and consumptionTable name the companion tables of an
// outbox table (MaxTableLength leaves room for the suffixes).
func consumersTable(table string) string   { return table + "_consumers" }
func consumptionTable(table string) string { return table + "_consumption" }

// requiredColumns are the columns the store reads and writes.
var requiredColumns = []string{
	"id", "event_id", "event_key", "event_type", "payload", "headers", "status", "retry_count",
	"last_error", "created_at", "next_attempt_at", "published_at", "lease_owner", "lease_token", "fanout",
}

// requiredIndexes are the indexes the store's queries rely on.
var requiredIndexes = []string{"uk_event_id", "idx_due", "idx_key", "idx_fanout"}

// upgrades bring tables made by earlier versions of the store up to date;
// each adds an index (and the column it needs) that createTable already
// has, in one ALTER.
var upgrades = []struct {
	index string
	ddl   string
}{
	{"idx_key", "ALTER TABLE `%s` ADD INDEX idx_key (status, event_key, id)"},
	{"idx_fanout", "ALTER TABLE `%s` ADD COLUMN fanout TINYINT UNSIGNED NOT NULL DEFAULT 0, ADD INDEX idx_fanout (fanout, id)"},
}

// Migrate creates the outbox table and its two companion tables for named
// consumers if they do not exist, upgrades an outbox table made by an
// earlier version, and checks that it has the columns and indexes the
// store needs. It is idempotent and safe to run from several instances at
// start-up.
func (s *Store) Migrate(ctx context.Context) error {
	for _, ddl := range []string{
		fmt.Sprintf(createTable, s.table),
		fmt.Sprintf(createConsumers, consumersTable(s.table)),
		fmt.Sprintf(createConsumption, consumptionTable(s.table)),
	} {
		if _, err := s.db.ExecContext(ctx, ddl); err != nil {
			return s.wrap("migrate", err)
		}
	}
	columns, err := s.names(ctx, columnNamesQuery)
	if err != nil {
		return err
	}
	if missing := missingNames("column", slices.DeleteFunc(slices.Clone(requiredColumns), upgradedColumn), columns); len(missing) > 0 {
		return s.notOurs("migrate", missing)
	}
	indexes, err := s.names(ctx, indexNamesQuery)
	if err != nil {
		return err
	}
	for _, u := range upgrades {
		if slices.Contains(indexes, u.index) {
			continue
		}
		// Another instance may be adding it at the same moment.
		if _, err := s.db.ExecContext(ctx, fmt.Sprintf(u.ddl, s.table)); err != nil && classify(err) != classDuplicateIndex && classify(err) != classDuplicateColumn {
			return s.wrap("migrate: add "+u.index, err)
		}
	}
	if indexes, err = s.names(ctx, indexNamesQuery); err != nil {
		return err
	}
	if columns, err = s.names(ctx, columnNamesQuery); err != nil {
		return err
	}
	if missing := missingNames("column", requiredColumns, columns); len(missing) > 0 {
		return s.notOurs("migrate", missing)
	}
	if missing := missingNames("index", requiredIndexes, indexes); len(missing) > 0 {
		return s.notOurs("migrate", missing)
	}
	return nil
}

// upgradedColumn says whether Migrate adds the column to an older table.
func upgradedColumn(name string) bool { return name == "fanout" }

const (
	columnNamesQuery = "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?"
	indexNamesQuery  = "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?"
)

// missingNames lists the wanted names not in have, as "<kind> <name>".
func missingNames(kind string, want, have []string) []string {
	var missing []string
	for _, n := range want {
		if !slices.Contains(have, n) {
			missing = append(missing, kind+" "+n)
		}
	}
	return missing
}

// notOurs reports a table of the same name made by something else, at
// start-up rather than on the first claim.
func (s *Store) notOurs(op string, missing []string) error {
	return fmt.Errorf("mysql store: %s: table %q exists but lacks %s; it was not made by this store", op, s.table, strings.Join(missing, ", "))
}

func (s *Store) names(ctx context.Context, query string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, query, s.table)
	if err != nil {
		return nil, s.wrap("migrate", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, s.wrap("migrate", err)
		}
		out = append(out, strings.ToLower(n))
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("migrate", err)
	}
	return out, nil
}
