package svckit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
)

// The variables that give mysql.dsn (MySQL.DSN) in every service.
const (
	EnvMySQLDSN     = "MYSQL_DSN"
	EnvMySQLDSNFile = "MYSQL_DSN_FILE"
)

// MySQLEnv is the setting of mysql.dsn from EnvMySQLDSN (or the file
// EnvMySQLDSNFile names) for a config C whose mysql block block returns.
func MySQLEnv[C any](block func(c *C) *MySQL) EnvSetting[C] {
	return Env(EnvVar{Var: EnvMySQLDSN, FileVar: EnvMySQLDSNFile, Key: "mysql.dsn"}, func(c *C, v string) { block(c).DSN = v })
}

// MySQL is a service's mysql block: its database and the pool's limits.
// It prints (every fmt verb) and logs with the DSN's password redacted.
type MySQL struct {
	// DSN is the go-sql-driver/mysql DSN of the service's database, e.g.
	// "app:PASSWORD@tcp(db:3306)/rooms?interpolateParams=true". Required,
	// here or, better, in MYSQL_DSN or the file MYSQL_DSN_FILE names (a
	// mounted Kubernetes secret); the environment wins. It must name a
	// database; the "/" before the name is what lets the password hold
	// "/" and "@". It is never printed with its password.
	DSN string `yaml:"dsn"`
	// MaxOpenConns caps the pool (sql.DB.SetMaxOpenConns). Its default
	// is the service's.
	MaxOpenConns int `yaml:"max_open_conns"`
	// MaxIdleConns keeps up to this many idle connections. Its default is
	// the service's, and never more than MaxOpenConns.
	MaxIdleConns int `yaml:"max_idle_conns"`
	// ConnMaxLifetime closes connections older than this, so that a
	// failover or a proxy's rebalancing is picked up and the server's
	// wait_timeout never cuts a pooled connection. Defaults to 5m.
	ConnMaxLifetime time.Duration `yaml:"conn_max_lifetime"`
	// ConnMaxIdleTime closes connections idle this long, so that a quiet
	// instance gives its share of max_connections back. Defaults to 1m.
	ConnMaxIdleTime time.Duration `yaml:"conn_max_idle_time"`
	// StartupTimeout is how long start-up waits for MySQL to answer,
	// retrying every second, as it may be starting beside us. Defaults
	// to 1m; after it, start-up fails (and Kubernetes restarts the pod).
	StartupTimeout time.Duration `yaml:"startup_timeout"`
}

// The defaults MySQL.WithDefaults fills in.
const (
	DefaultConnMaxLifetime = 5 * time.Minute
	DefaultConnMaxIdleTime = time.Minute
	DefaultStartupTimeout  = time.Minute
)

// WithDefaults returns m with the service's pool sizes and the
// documented defaults filled in for every zero value; MaxIdleConns
// defaults to maxIdle or MaxOpenConns, whichever is smaller.
func (m MySQL) WithDefaults(maxOpen, maxIdle int) MySQL {
	OrDefault(&m.MaxOpenConns, maxOpen)
	OrDefault(&m.MaxIdleConns, min(maxIdle, m.MaxOpenConns))
	OrDefault(&m.ConnMaxLifetime, DefaultConnMaxLifetime)
	OrDefault(&m.ConnMaxIdleTime, DefaultConnMaxIdleTime)
	OrDefault(&m.StartupTimeout, DefaultStartupTimeout)
	return m
}

// Validate checks the block; every error names its key (mysql.…), never
// the DSN's password.
func (m MySQL) Validate() error {
	var errs []error
	if m.DSN == "" {
		errs = append(errs, fmt.Errorf("config: mysql.dsn: required (or set %s or %s)", EnvMySQLDSN, EnvMySQLDSNFile))
	} else if dsn, err := dsnsafe.Parse(m.DSN); err != nil {
		errs = append(errs, fmt.Errorf("config: mysql.dsn: %w", err))
	} else if dsn.DBName == "" {
		errs = append(errs, fmt.Errorf("config: mysql.dsn %s: names no database (add /DATABASE after the address)", dsnsafe.Target(dsn)))
	}
	if m.MaxOpenConns < 0 {
		errs = append(errs, fmt.Errorf("config: mysql.max_open_conns: %d: must not be negative", m.MaxOpenConns))
	}
	if m.MaxIdleConns < 0 || m.MaxIdleConns > m.MaxOpenConns {
		errs = append(errs, fmt.Errorf("config: mysql.max_idle_conns: %d: must be 0 to max_open_conns (%d)", m.MaxIdleConns, m.MaxOpenConns))
	}
	if m.ConnMaxLifetime < 0 || m.ConnMaxIdleTime < 0 || m.StartupTimeout < 0 {
		errs = append(errs, fmt.Errorf("config: mysql.conn_max_lifetime %v, conn_max_idle_time %v, startup_timeout %v: must not be negative",
			m.ConnMaxLifetime, m.ConnMaxIdleTime, m.StartupTimeout))
	}
	return errors.Join(errs...)
}

// String prints the block with the DSN's password redacted.
func (m MySQL) String() string {
	type plain MySQL
	m.DSN = RedactDSN(m.DSN)
	return fmt.Sprintf("%+v", plain(m))
}

// Format makes every verb (%v, %+v, %#v, %s, %q, %x …) print String.
func (m MySQL) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, m.String()) }

// LogValue makes slog log String.
func (m MySQL) LogValue() slog.Value { return slog.StringValue(m.String()) }

// Open opens a pool on the DSN with m's limits and waits (StartupTimeout,
// or ctx) until the server answers, as it may still be starting next to
// the service, retrying every second. Its errors name the DSN's user,
// address and database, never its password.
func (m MySQL) Open(ctx context.Context) (*sql.DB, error) {
	cfg, err := dsnsafe.Parse(m.DSN)
	if err != nil {
		return nil, fmt.Errorf("mysql: dsn: %w", err)
	}
	target := dsnsafe.Target(cfg)
	connector, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql %s: %w", target, dsnsafe.Hide(err, cfg))
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(m.MaxOpenConns)
	db.SetMaxIdleConns(m.MaxIdleConns)
	db.SetConnMaxLifetime(m.ConnMaxLifetime)
	db.SetConnMaxIdleTime(m.ConnMaxIdleTime)
	if err := WaitFor(ctx, m.StartupTimeout, db.PingContext); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql %s did not answer within %v: %w", target, m.StartupTimeout, dsnsafe.Hide(err, cfg))
	}
	return db, nil
}
