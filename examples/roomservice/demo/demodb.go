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
	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/sirupsen/logrus"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
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

// demoMySQL finds a MySQL for the demo: the server DSN given (-dsn or
// MYSQL_DSN), else a MySQL container where Docker runs, else an embedded
// engine, so that the demo runs on a machine with only Go. It creates a
// scratch database there; cleanup drops it and stops what was started.
func demoMySQL(ctx context.Context, dsn string, out io.Writer) (demoDB, error) {
	serverDSN, source, stop, embedded, err := demoServer(ctx, dsn)
	if err != nil {
		return demoDB{}, err
	}
	fmt.Fprintln(out, "MySQL:", source)
	cfg, err := mysqldrv.ParseDSN(serverDSN)
	if err != nil {
		stop()
		return demoDB{}, fmt.Errorf("demo: bad DSN: %w", err)
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
		stop()
		return demoDB{}, fmt.Errorf("demo: create database %s: %w", name, err)
	}
	cfg.DBName, cfg.InterpolateParams = name, true
	maxOpen := 0
	if embedded {
		maxOpen = 1
	}
	return demoDB{dsn: cfg.FormatDSN(), maxOpenConns: maxOpen, cleanup: func() {
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS `"+name+"`")
		admin.Close()
		stop()
	}}, nil
}

func demoServer(ctx context.Context, dsn string) (serverDSN, source string, stop func(), embedded bool, err error) {
	if dsn != "" {
		return dsn, "the server from -dsn/MYSQL_DSN", func() {}, false, nil
	}
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, cerr := tcmysql.Run(startCtx, "mysql:8.4", tcmysql.WithUsername("root"), tcmysql.WithPassword("demo"))
	if cerr == nil {
		if serverDSN, err = c.ConnectionString(startCtx); err == nil {
			return serverDSN, "a MySQL 8.4 container (testcontainers)", func() { _ = c.Terminate(context.Background()) }, false, nil
		}
		_ = c.Terminate(context.Background())
	}
	serverDSN, stop, err = startEmbeddedMySQL()
	if err != nil {
		return "", "", nil, false, fmt.Errorf("demo: no -dsn/MYSQL_DSN, no Docker (%v), and the embedded engine failed: %w", cerr, err)
	}
	return serverDSN, "embedded go-mysql-server, since there is no -dsn/MYSQL_DSN and no Docker. " +
		"It has no real row locks and runs one statement at a time, so it serves this single-process demo only; production and the tests use MySQL/MariaDB", stop, true, nil
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
