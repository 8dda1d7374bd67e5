package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// mysqlDialect is MySQL 8.0+ and MariaDB 10.6+, through
// go-sql-driver/mysql and store/mysql.
type mysqlDialect struct {
	cfg     *gomysql.Config
	secrets []string
}

// newMySQL parses a DSN that is not "" (newDialect).
func newMySQL(dsn string) (*mysqlDialect, error) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		// The parser's error may quote the DSN.
		return nil, errors.New("the MySQL DSN does not parse; its form is user:password@tcp(host:3306)/database, with a password's @, / and # percent-encoded only where the driver allows, or pass it in OUTBOXSOAK_DSN")
	}
	return &mysqlDialect{cfg: cfg, secrets: secretsOf(dsn, cfg.Passwd)}, nil
}

func (d *mysqlDialect) name() string        { return "mysql" }
func (d *mysqlDialect) dsnDatabase() string { return d.cfg.DBName }
func (d *mysqlDialect) ph(int) string       { return "?" }
func (d *mysqlDialect) redact(err error) error {
	return redactErr(err, d.secrets)
}

func (d *mysqlDialect) describe(database string) string {
	if database == "" {
		database = d.cfg.DBName
	}
	return redactText(d.cfg.Addr+"/"+database, d.secrets)
}

func (d *mysqlDialect) serverAddr() (string, error) {
	if d.cfg.Net != "tcp" {
		return "", fmt.Errorf("the DSN reaches the server over %s: a proxy needs tcp", d.cfg.Net)
	}
	return d.cfg.Addr, nil
}

func (d *mysqlDialect) open(database, addr string) (*sql.DB, error) {
	cfg := d.cfg.Clone()
	if database != "" {
		cfg.DBName = database
	}
	if addr != "" {
		cfg.Net, cfg.Addr = "tcp", addr
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, d.redact(err)
	}
	return sql.OpenDB(conn), nil
}

func (d *mysqlDialect) createDatabase(ctx context.Context, db *sql.DB, name string) error {
	_, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"`")
	return d.redact(err)
}

func (d *mysqlDialect) dropDatabase(ctx context.Context, db *sql.DB, name string) error {
	_, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
	return d.redact(err)
}

func (d *mysqlDialect) newStore(db *sql.DB, table string, _ time.Duration) (soakStore, error) {
	return mysql.New(db, mysql.Options{Table: table})
}

func (d *mysqlDialect) listen(string, string, string, *slog.Logger) (func(context.Context, func()) error, error) {
	return nil, nil // MySQL has no notifications: workers poll
}

func (d *mysqlDialect) version(ctx context.Context, db *sql.DB) (string, error) {
	var v string
	err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v)
	if !strings.Contains(v, "MariaDB") {
		v = "MySQL " + v
	}
	return v, d.redact(err)
}

// figures reads the sessions on database (PROCESSLIST: those whose
// current database it is), the tables' sizes (information_schema, which
// InnoDB refreshes from its persistent statistics: coarse, and behind by
// up to a tenth of a table's rows) and the history list length.
func (d *mysqlDialect) figures(ctx context.Context, db *sql.DB, database, prefix string) (serverFigures, error) {
	f := serverFigures{Tables: map[string]tableFigures{}}
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ?", database).Scan(&f.Connections)
	if err != nil {
		return f, d.redact(fmt.Errorf("count sessions: %w", err))
	}
	rows, err := db.QueryContext(ctx, `SELECT TABLE_NAME, COALESCE(DATA_LENGTH, 0), COALESCE(INDEX_LENGTH, 0), COALESCE(TABLE_ROWS, 0)
		FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME LIKE ?`, database, likePrefix(prefix))
	if err != nil {
		return f, d.redact(fmt.Errorf("table sizes: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		t := tableFigures{DeadTuples: -1}
		if err := rows.Scan(&name, &t.DataBytes, &t.IndexBytes, &t.LiveTuples); err != nil {
			return f, d.redact(fmt.Errorf("table sizes: %w", err))
		}
		f.Tables[name] = t
	}
	if err := rows.Err(); err != nil {
		return f, d.redact(fmt.Errorf("table sizes: %w", err))
	}
	err = db.QueryRowContext(ctx, "SELECT `COUNT` FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'").Scan(&f.HistoryLength)
	if err != nil {
		f.HistoryLength = -1 // not every server shows it; not worth failing a sample
	}
	return f, nil
}

// killSessions KILLs the sessions on database from one of ports
// (PROCESSLIST's HOST is host:port for a TCP client).
func (d *mysqlDialect) killSessions(ctx context.Context, db *sql.DB, database string, ports []int) (int, error) {
	want := portSet(ports)
	rows, err := db.QueryContext(ctx, "SELECT ID, HOST FROM information_schema.PROCESSLIST WHERE DB = ?", database)
	if err != nil {
		return 0, d.redact(fmt.Errorf("list sessions: %w", err))
	}
	var ids []int64
	for rows.Next() {
		var id int64
		var host string
		if err := rows.Scan(&id, &host); err != nil {
			rows.Close()
			return 0, d.redact(fmt.Errorf("list sessions: %w", err))
		}
		if i := strings.LastIndex(host, ":"); i >= 0 {
			if port, err := strconv.Atoi(host[i+1:]); err == nil && want[port] {
				ids = append(ids, id)
			}
		}
	}
	rows.Close()
	killed := 0
	for _, id := range ids {
		// A session that ended meanwhile is no error worth stopping for.
		if _, err := db.ExecContext(ctx, "KILL "+strconv.FormatInt(id, 10)); err == nil {
			killed++
		}
	}
	return killed, d.redact(rows.Err())
}
