// Package localmysql is how the examples' commands that need a MySQL
// server (the quick start, the room-service demo) choose one, the same
// way: -dsn, else MYSQL_DSN, else DefaultDSN, the development machines'
// and CI's MariaDB.
package localmysql

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"

	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
)

// DefaultDSN is the server used when neither -dsn nor MYSQL_DSN names
// one.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/"

// EnvDSN names the variable that names a server when -dsn does not.
const EnvDSN = "MYSQL_DSN"

// Named returns the server DSN that -dsn (flagValue) or else MYSQL_DSN
// names, or "".
func Named(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	return os.Getenv(EnvDSN)
}

// Choose returns Named(flagValue), else DefaultDSN.
func Choose(flagValue string) string {
	if dsn := Named(flagValue); dsn != "" {
		return dsn
	}
	return DefaultDSN
}

// Server is a server that answered.
type Server struct {
	// Target is what the DSN reaches, without its password
	// (USER@tcp(ADDR)/).
	Target string
	// Version is the server's VERSION(), e.g. 10.11.6-MariaDB-0+deb12u1.
	Version string
}

func (s Server) String() string { return s.Version + " at " + s.Target }

// Ask connects to the server at dsn and asks its version, giving up
// after timeout. Its error never holds the DSN's password.
func Ask(ctx context.Context, dsn string, timeout time.Duration) (Server, error) {
	cfg, err := dsnsafe.Parse(dsn)
	if err != nil {
		return Server{}, fmt.Errorf("the DSN %w", err)
	}
	cfg.DBName, cfg.Timeout = "", timeout
	srv := Server{Target: dsnsafe.Target(cfg)}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return srv, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&srv.Version); err != nil {
		return srv, fmt.Errorf("no answer from %s: %w", srv.Target, dsnsafe.Hide(err, cfg))
	}
	return srv, nil
}
