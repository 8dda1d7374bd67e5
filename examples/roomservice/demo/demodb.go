package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"time"

	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	gmssql "github.com/dolthub/go-mysql-server/sql"
	_ "github.com/go-sql-driver/mysql"
	"github.com/sirupsen/logrus"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"

	"github.com/outboxrelay/outboxrelay/examples/internal/localmysql"
	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
)

// demoDB is the scratch database the demo runs in.
type demoDB struct {
	dsn string
	// maxOpenConns is 1 on the embedded engine, whose in-memory tables
	// are not safe for concurrent statements (the race detector finds
	// the engine racing itself); 0 elsewhere.
	maxOpenConns int
	cleanup      func()
}

// demoMySQL finds a MySQL for the demo (see finder.find) and says which
// it took. It creates a scratch database there; cleanup drops it and
// stops what was started.
func demoMySQL(ctx context.Context, named string, out io.Writer) (demoDB, error) {
	return defaultFinder.demoMySQL(ctx, named, out)
}

func (f finder) demoMySQL(ctx context.Context, named string, out io.Writer) (demoDB, error) {
	srv, err := f.find(ctx, named)
	if err != nil {
		return demoDB{}, err
	}
	fmt.Fprintln(out, "MySQL:", srv.source)
	cfg, err := dsnsafe.Parse(srv.dsn) // the driver's errors can quote the password
	if err != nil {
		srv.stop()
		return demoDB{}, fmt.Errorf("demo: -dsn: %w", err)
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := "roomservice_demo_" + hex.EncodeToString(suffix[:])
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err == nil {
		_, err = admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`")
	}
	if err != nil {
		srv.stop()
		return demoDB{}, fmt.Errorf("demo: create database %s on %s: %w", name, dsnsafe.Target(cfg), dsnsafe.Hide(err, cfg))
	}
	cfg.DBName, cfg.InterpolateParams = name, true
	maxOpen := 0
	if srv.embedded {
		maxOpen = 1
	}
	return demoDB{dsn: cfg.FormatDSN(), maxOpenConns: maxOpen, cleanup: func() {
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS `"+name+"`")
		admin.Close()
		srv.stop()
	}}, nil
}

// demoServer is the server the demo runs on.
type demoServer struct {
	dsn    string
	source string // which server, for the narration
	stop   func()
	// embedded is true for the embedded engine.
	embedded bool
}

// finder finds the demo's server: the one -dsn or MYSQL_DSN names;
// else the default server (localmysql.DefaultDSN, as the quick start
// takes) if it answers; else a MySQL container where Docker runs; else
// the embedded engine, so that the demo runs on a machine with only Go.
type finder struct {
	defaultDSN string
	container  func(ctx context.Context) (dsn string, stop func(), err error)
	embedded   func() (dsn string, stop func(), err error)
}

var defaultFinder = finder{defaultDSN: localmysql.DefaultDSN, container: startContainer, embedded: startEmbeddedMySQL}

// askTimeout bounds the wait for the default server's answer.
const askTimeout = 5 * time.Second

func (f finder) find(ctx context.Context, named string) (demoServer, error) {
	if named != "" {
		srv, err := localmysql.Ask(ctx, named, askTimeout)
		if err != nil {
			return demoServer{}, fmt.Errorf("demo: the server -dsn/%s names: %w", localmysql.EnvDSN, err)
		}
		return demoServer{dsn: named, source: fmt.Sprintf("%s, named by -dsn/%s", srv, localmysql.EnvDSN), stop: func() {}}, nil
	}
	srv, askErr := localmysql.Ask(ctx, f.defaultDSN, askTimeout)
	if askErr == nil {
		return demoServer{dsn: f.defaultDSN, source: fmt.Sprintf("%s, the default (neither -dsn nor %s names a server)", srv, localmysql.EnvDSN), stop: func() {}}, nil
	}
	dsn, stop, cerr := f.container(ctx)
	if cerr == nil {
		return demoServer{dsn: dsn, source: fmt.Sprintf("a MySQL 8.4 container (testcontainers), since neither -dsn nor %s names a server and %v", localmysql.EnvDSN, askErr), stop: stop}, nil
	}
	dsn, stop, err := f.embedded()
	if err != nil {
		return demoServer{}, fmt.Errorf("demo: no -dsn/%s, %v, no Docker (%v), and the embedded engine failed: %w", localmysql.EnvDSN, askErr, cerr, err)
	}
	return demoServer{dsn: dsn, stop: stop, embedded: true, source: fmt.Sprintf("embedded go-mysql-server, since neither -dsn nor %s names a server, %v, and there is no Docker. "+
		"It has no real row locks and runs one statement at a time, so it serves this single-process demo only; production and the tests use MySQL/MariaDB", localmysql.EnvDSN, askErr)}, nil
}

// startContainer starts a MySQL 8.4 container through testcontainers.
func startContainer(ctx context.Context) (string, func(), error) {
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, err := tcmysql.Run(startCtx, "mysql:8.4", tcmysql.WithUsername("root"), tcmysql.WithPassword("demo"))
	if err != nil {
		return "", nil, err
	}
	dsn, err := c.ConnectionString(startCtx)
	if err != nil {
		_ = c.Terminate(context.Background())
		return "", nil, err
	}
	return dsn, func() { _ = c.Terminate(context.Background()) }, nil
}

// startEmbeddedMySQL serves an in-memory, MySQL-compatible engine
// (dolthub/go-mysql-server) on a loopback port.
func startEmbeddedMySQL() (dsn string, stop func(), err error) {
	logrus.SetLevel(logrus.ErrorLevel) // the engine logs every connection at info
	pro := memory.NewDBProvider()
	engine := sqle.NewDefault(pro)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	s, err := server.NewServer(server.Config{Protocol: "tcp", Listener: ln}, engine, gmssql.NewContext, memory.NewSessionBuilder(pro), nil)
	if err != nil {
		ln.Close()
		return "", nil, err
	}
	go func() { _ = s.Start() }()
	return "root@tcp(" + ln.Addr().String() + ")/", func() { _ = s.Close() }, nil
}
