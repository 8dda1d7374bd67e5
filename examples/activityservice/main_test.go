package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/examples/activityservice/internal/activityservice"
	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
)

// TestUsage: -h lists every environment variable by name, never a value.
func TestUsage(t *testing.T) {
	t.Setenv("NATS_URL", "nats://user:hunter2@nats:4222")
	var out strings.Builder
	require.Equal(t, 0, run([]string{"-h"}, &out))
	for _, name := range []string{"MYSQL_DSN, MYSQL_DSN_FILE", "NATS_URL, NATS_URL_FILE", "ACTIVITY_NODE_ID", "-config"} {
		require.Contains(t, out.String(), name)
	}
	require.NotContains(t, out.String(), "hunter2")
}

// TestBadArguments: a stray argument or flag is a usage error (2); a
// configuration that does not validate fails (1), naming the key.
func TestBadArguments(t *testing.T) {
	var out strings.Builder
	require.Equal(t, svckit.ExitUsage, run([]string{"extra"}, &out))
	require.Contains(t, out.String(), `unexpected argument "extra"`)
	require.Equal(t, svckit.ExitUsage, run([]string{"-nope"}, &out))
	for _, v := range []string{"MYSQL_DSN", "MYSQL_DSN_FILE", "NATS_URL", "NATS_URL_FILE"} {
		t.Setenv(v, "")
	}
	out.Reset()
	require.Equal(t, svckit.ExitFailed, run(nil, &out))
	require.Contains(t, out.String(), "config: mysql.dsn: required")
}

// TestConfigFile: the local development config file loads as it is.
func TestConfigFile(t *testing.T) {
	for _, v := range []string{"MYSQL_DSN", "MYSQL_DSN_FILE", "NATS_URL", "NATS_URL_FILE", "ACTIVITY_NODE_ID", "ACTIVITY_HTTP_ADDR", "ACTIVITY_ADMIN_ADDR"} {
		t.Setenv(v, "")
	}
	cfg, err := activityservice.LoadConfig("config.yaml")
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8081", cfg.HTTP.Addr)
	require.Equal(t, "ROOMS", cfg.Rooms.Stream)
	require.Equal(t, []int64{100, 500, 2000, 10000, 50000}, cfg.Levels)
}
