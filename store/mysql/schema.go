package mysql

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// deliveryStateColumns are a consumer's delivery state, the same in the
// outbox table (the default consumer) and the consumption table (named
// consumers), so that one set of statements serves both (see target).
const deliveryStateColumns = `
  status          VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending',
  retry_count     INT UNSIGNED NOT NULL DEFAULT 0,
  last_error      VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  created_at      DATETIME(6) NOT NULL,
  next_attempt_at DATETIME(6) NOT NULL,
  published_at    DATETIME(6) NULL,
  lease_owner     VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  lease_token     CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,`

// createTable is the outbox table.
//
//   - id orders records in insert order and is the claim tie-breaker.
//   - event_key is binary: compared byte by byte, which for UTF-8 is code
//     point order, with no padding, so that every key sorts and compares
//     as itself (a text collation with PAD SPACE would make "a" and "a "
//     one key and sort "\t" before "").
//   - created_at is when the row was written, on the database clock;
//     occurred_at is Message.CreatedAt when the writer set one.
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
//     consumers; idx_fanout finds the ones still to hand
//     over, however long the history.
//
// All times are UTC on the database clock (UTC_TIMESTAMP).
const createTable = "CREATE TABLE IF NOT EXISTS {outbox} (" + `
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  event_id        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  event_key       VARBINARY(1020) NOT NULL DEFAULT '',
  event_type      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  payload         LONGBLOB NOT NULL,
  headers         TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  occurred_at     DATETIME(6) NULL,` + deliveryStateColumns + `
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
// removing is 1 from the moment RemoveConsumer starts until its state is
// gone; add_token is the AddConsumer call that registered it.
const createConsumers = "CREATE TABLE IF NOT EXISTS {consumers} (" + `
  name            VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  start_seq       BIGINT UNSIGNED NOT NULL,
  backfill_cursor BIGINT UNSIGNED NULL,
  created_at      DATETIME(6) NOT NULL,
  removing        TINYINT UNSIGNED NOT NULL DEFAULT 0,
  add_token       CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`

// createConsumption holds the delivery state of the named consumers, one
// row per consumer and message, with the state columns of the outbox
// table and the message fields claims need (the payload stays in the
// outbox table). Its indexes mirror the outbox table's, prefixed by the
// consumer, so each consumer's claims read only its own rows; idx_msg
// serves retention.
const createConsumption = "CREATE TABLE IF NOT EXISTS {consumption} (" + `
  consumer        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  msg_id          BIGINT UNSIGNED NOT NULL,
  event_id        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  event_key       VARBINARY(1020) NOT NULL DEFAULT '',
  event_type      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,` + deliveryStateColumns + `
  PRIMARY KEY (consumer, msg_id),
  UNIQUE KEY uk_event_id (consumer, event_id),
  KEY idx_due (consumer, status, next_attempt_at, msg_id),
  KEY idx_key (consumer, status, event_key, msg_id),
  KEY idx_msg (msg_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`

// consumersTable and consumptionTable name the companion tables of an
// outbox table (MaxTableLength leaves room for the suffixes).
func consumersTable(table string) string   { return table + consumersSuffix }
func consumptionTable(table string) string { return table + consumptionSuffix }

const (
	consumersSuffix   = "_consumers"
	consumptionSuffix = "_consumption"
)

// requiredColumns are the columns the store reads and writes, per table
// (by its suffix: "" for the outbox table itself), with the data types the
// store depends on ("" for any).
var requiredColumns = map[string]map[string]string{
	"": {
		"id": "", "event_id": "", "event_key": "varbinary", "event_type": "", "payload": "", "headers": "",
		"occurred_at": "", "status": "", "retry_count": "", "last_error": "", "created_at": "", "next_attempt_at": "",
		"published_at": "", "lease_owner": "", "lease_token": "", "fanout": "",
	},
	consumersSuffix: {"name": "", "start_seq": "", "backfill_cursor": "", "created_at": "", "removing": "", "add_token": ""},
	consumptionSuffix: {
		"consumer": "", "msg_id": "", "event_id": "", "event_key": "varbinary", "event_type": "", "status": "", "retry_count": "",
		"last_error": "", "created_at": "", "next_attempt_at": "", "published_at": "", "lease_owner": "", "lease_token": "",
	},
}

// requiredIndexes are the indexes the store's queries rely on, per table.
var requiredIndexes = map[string][]string{
	"":                {"uk_event_id", "idx_due", "idx_key", "idx_fanout"},
	consumptionSuffix: {"uk_event_id", "idx_due", "idx_key", "idx_msg"},
}

// upgrade brings a table made by an earlier version of the store up to
// what the CREATE statements above make: it adds a column or an index, or
// changes a column's type. It is needed while the table lacks what it
// adds.
type upgrade struct {
	suffix string // the table: "" for the outbox table, or a companion's suffix
	what   string // "column x", "index x" or "type of x": what it adds
	ddl    string // on the same table: {outbox}, {consumers} or {consumption}
}

// upgrades, in the order they run. Changing event_key's type rebuilds the
// table (a copy on both servers): on a large table, run it in a quiet
// hour, or apply the same statement with an online schema tool first.
var upgrades = []upgrade{
	{"", "index idx_key", "ALTER TABLE {outbox} ADD INDEX idx_key (status, event_key, id)"},
	{"", "column fanout", "ALTER TABLE {outbox} ADD COLUMN fanout TINYINT UNSIGNED NOT NULL DEFAULT 0"},
	{"", "index idx_fanout", "ALTER TABLE {outbox} ADD INDEX idx_fanout (fanout, id)"},
	{"", "column occurred_at", "ALTER TABLE {outbox} ADD COLUMN occurred_at DATETIME(6) NULL"},
	{"", "type of event_key", "ALTER TABLE {outbox} MODIFY event_key VARBINARY(1020) NOT NULL DEFAULT ''"},
	{consumptionSuffix, "type of event_key", "ALTER TABLE {consumption} MODIFY event_key VARBINARY(1020) NOT NULL DEFAULT ''"},
	{consumersSuffix, "column removing", "ALTER TABLE {consumers} ADD COLUMN removing TINYINT UNSIGNED NOT NULL DEFAULT 0"},
	{consumersSuffix, "column add_token", "ALTER TABLE {consumers} ADD COLUMN add_token CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL"},
}

// Migrate creates the outbox table and its two companion tables for named
// consumers if they do not exist, upgrades tables made by earlier
// versions (adding the columns and indexes added since), and checks that
// they have the columns and indexes the store needs. It is idempotent and
// safe to run from several instances at start-up. A table of the same name
// that the store did not make fails with an error naming what it lacks.
func (s *Store) Migrate(ctx context.Context) error {
	for _, ddl := range []string{createTable, createConsumers, createConsumption} {
		if _, err := s.t.render(ddl).exec(ctx, s.db); err != nil {
			return s.wrap("migrate", err)
		}
	}
	sc, err := s.readSchema(ctx)
	if err != nil {
		return s.wrap("migrate", err)
	}
	if missing := sc.missing(true); len(missing) > 0 {
		return s.notOurs("migrate", missing)
	}
	if err := s.runUpgrades(ctx, sc); err != nil {
		return err
	}
	if sc, err = s.readSchema(ctx); err != nil {
		return s.wrap("migrate", err)
	}
	if missing := sc.missing(false); len(missing) > 0 {
		return s.notOurs("migrate", missing)
	}
	return nil
}

// runUpgrades runs the upgrades the tables need, as sc says.
func (s *Store) runUpgrades(ctx context.Context, sc schema) error {
	for _, u := range upgrades {
		if !sc.needs(u) {
			continue
		}
		// Another instance may be running the same upgrade at this moment.
		_, err := s.t.render(u.ddl).exec(ctx, s.db)
		if err != nil && classify(err) != classDuplicateIndex && classify(err) != classDuplicateColumn {
			return s.wrap(fmt.Sprintf("migrate: add %s to %s", u.what, s.table+u.suffix), err)
		}
	}
	return nil
}

// Verify checks that the tables exist and have what the store needs,
// without creating or changing anything (Migrate does that). Tools call
// it first, so that a wrong table name fails with a clear error.
func (s *Store) Verify(ctx context.Context) error {
	sc, err := s.readSchema(ctx)
	if err != nil {
		return s.wrap("verify", err)
	}
	if len(sc[""].columns) == 0 {
		return fmt.Errorf("mysql store: table %q does not exist in this database (run Store.Migrate)", s.table)
	}
	if missing := sc.missing(true); len(missing) > 0 {
		return s.notOurs("verify", missing)
	}
	if missing := sc.missing(false); len(missing) > 0 {
		return fmt.Errorf("mysql store: verify: table %q lacks %s: run Store.Migrate to upgrade it", s.table, strings.Join(missing, ", "))
	}
	return nil
}

// tableSchema is what information_schema says about one table.
type tableSchema struct {
	columns map[string]string // name → data type, lower case
	indexes map[string]bool
}

// schema is the outbox table's and its companions', by suffix.
type schema map[string]tableSchema

// needs reports whether the upgrade has yet to run.
func (sc schema) needs(u upgrade) bool {
	ts := sc[u.suffix]
	kind, name, _ := strings.Cut(u.what, " ")
	switch kind {
	case "index":
		return !ts.indexes[name]
	case "column":
		_, ok := ts.columns[name]
		return !ok
	default: // "type of x"
		col := strings.TrimPrefix(name, "of ")
		have, ok := ts.columns[col]
		return ok && have != requiredColumns[u.suffix][col]
	}
}

// missing lists what the tables lack, as "column x of t", "index x of t"
// or "type of x of t". With beforeUpgrades, it leaves out what an upgrade
// adds, and a companion table that does not exist yet.
func (sc schema) missing(beforeUpgrades bool) []string {
	var out []string
	for _, suffix := range []string{"", consumersSuffix, consumptionSuffix} {
		ts := sc[suffix]
		if beforeUpgrades && suffix != "" {
			continue
		}
		upgraded := func(what string) bool {
			return beforeUpgrades && slices.ContainsFunc(upgrades, func(u upgrade) bool { return u.suffix == suffix && u.what == what })
		}
		var lacks []string
		for col, typ := range requiredColumns[suffix] {
			have, ok := ts.columns[col]
			switch {
			case !ok && !upgraded("column "+col):
				lacks = append(lacks, "column "+col)
			case ok && typ != "" && have != typ && !upgraded("type of "+col):
				lacks = append(lacks, fmt.Sprintf("type of %s (%s, not %s)", col, have, typ))
			}
		}
		for _, idx := range requiredIndexes[suffix] {
			if !ts.indexes[idx] && !upgraded("index "+idx) {
				lacks = append(lacks, "index "+idx)
			}
		}
		slices.Sort(lacks)
		if suffix != "" {
			for i := range lacks {
				lacks[i] += " of the companion table " + suffix[1:]
			}
		}
		out = append(out, lacks...)
	}
	return out
}

// readSchema reads the columns and indexes of the outbox table and its
// companions.
func (s *Store) readSchema(ctx context.Context) (schema, error) {
	sc := schema{}
	for _, suffix := range []string{"", consumersSuffix, consumptionSuffix} {
		sc[suffix] = tableSchema{columns: map[string]string{}, indexes: map[string]bool{}}
	}
	of := func(table string) tableSchema { return sc[strings.TrimPrefix(table, s.table)] }
	err := scanTriples(ctx, s.db, columnsSQL(s.t, s.table), func(table, column, typ string) {
		of(table).columns[strings.ToLower(column)] = strings.ToLower(typ)
	})
	if err != nil {
		return nil, err
	}
	err = scanTriples(ctx, s.db, indexesSQL(s.t, s.table), func(table, index, _ string) {
		of(table).indexes[strings.ToLower(index)] = true
	})
	if err != nil {
		return nil, err
	}
	return sc, nil
}

// scanTriples runs st, a query of three text columns, and passes each row
// to f.
func scanTriples(ctx context.Context, q querier, st statement, f func(a, b, c string)) error {
	rows, err := st.query(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a, b, c string
		if err := rows.Scan(&a, &b, &c); err != nil {
			return err
		}
		f(a, b, c)
	}
	return rows.Err()
}

// columnsSQL reads the columns of the outbox table and its companions:
// table, column, data type.
func columnsSQL(t *target, table string) statement {
	return t.render("SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (?, ?, ?)",
		table, consumersTable(table), consumptionTable(table))
}

// indexesSQL reads the indexes of the outbox table and its companions:
// table, index, and an empty third column.
func indexesSQL(t *target, table string) statement {
	return t.render("SELECT DISTINCT TABLE_NAME, INDEX_NAME, '' FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (?, ?, ?)",
		table, consumersTable(table), consumptionTable(table))
}

// notOurs reports a table of the same name made by something else, at
// start-up rather than on the first claim.
func (s *Store) notOurs(op string, missing []string) error {
	return fmt.Errorf("mysql store: %s: table %q exists but lacks %s; it was not made by this store", op, s.table, strings.Join(missing, ", "))
}
