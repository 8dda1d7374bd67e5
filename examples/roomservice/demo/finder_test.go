package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/examples/internal/localmysql"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// refuse stands for a fallback that must not be taken.
func refuse(t *testing.T, what string) func() (string, func(), error) {
	return func() (string, func(), error) {
		t.Errorf("the demo tried %s", what)
		return "", nil, errors.New(what + " refused by the test")
	}
}

// TestDemoTakesTheDefaultServer: with neither -dsn nor MYSQL_DSN, a
// server that answers at the default address is the demo's (as it is
// the quick start's), and its first line names it and its version.
// (Issue 37: the demo took the embedded engine although MariaDB
// answered on 127.0.0.1:3306.) The test server stands for the default
// address.
func TestDemoTakesTheDefaultServer(t *testing.T) {
	server := testutil.ServerDSN(t)
	srv, err := localmysql.Ask(context.Background(), server, askTimeout)
	require.NoError(t, err)
	f := finder{
		defaultDSN: server,
		container:  func(context.Context) (string, func(), error) { return refuse(t, "a container")() },
		embedded:   refuse(t, "the embedded engine"),
	}
	var out bytes.Buffer
	db, err := f.demoMySQL(context.Background(), "", &out)
	require.NoError(t, err)
	t.Cleanup(db.cleanup)
	require.Zero(t, db.maxOpenConns, "a real server: no cap")
	require.Contains(t, out.String(), "MySQL: "+srv.Version+" at "+srv.Target+", the default (neither -dsn nor MYSQL_DSN names a server)")
}

// TestDemoFallsBackWhenTheDefaultIsSilent: nothing answers at the
// default address and there is no Docker: the embedded engine, and the
// demo says why.
func TestDemoFallsBackWhenTheDefaultIsSilent(t *testing.T) {
	addr := silentAddr(t)
	f := finder{
		defaultDSN: "root@tcp(" + addr + ")/",
		container:  func(context.Context) (string, func(), error) { return "", nil, errors.New("no Docker here") },
		embedded:   startEmbeddedMySQL,
	}
	var out bytes.Buffer
	db, err := f.demoMySQL(context.Background(), "", &out)
	require.NoError(t, err)
	t.Cleanup(db.cleanup)
	require.Equal(t, 1, db.maxOpenConns, "the embedded engine, serialised")
	require.Contains(t, out.String(), "MySQL: embedded go-mysql-server, since neither -dsn nor MYSQL_DSN names a server, no answer from root@tcp("+addr+")/")
}

// TestDemoNamedServerMustAnswer: a server that -dsn names is the demo's
// or nothing; it never falls back.
func TestDemoNamedServerMustAnswer(t *testing.T) {
	addr := silentAddr(t)
	f := finder{
		defaultDSN: testutil.ServerDSN(t),
		container:  func(context.Context) (string, func(), error) { return refuse(t, "a container")() },
		embedded:   refuse(t, "the embedded engine"),
	}
	_, err := f.demoMySQL(context.Background(), "app:pw@tcp("+addr+")/", &bytes.Buffer{})
	require.ErrorContains(t, err, "the server -dsn/MYSQL_DSN names: no answer from app@tcp("+addr+")/")
}

// silentAddr is a loopback address nothing listens on.
func silentAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
