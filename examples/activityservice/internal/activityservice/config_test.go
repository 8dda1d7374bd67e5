package activityservice

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	inboxmysql "github.com/outboxrelay/outboxrelay/inbox/mysql"
	"github.com/stretchr/testify/require"
)

// clearEnv unsets every variable of EnvSettings for the test.
func clearEnv(t *testing.T) {
	for _, s := range EnvSettings {
		t.Setenv(s.Var, "")
		if s.FileVar != "" {
			t.Setenv(s.FileVar, "")
		}
	}
}

const minimal = "mysql:\n  dsn: \"app@tcp(db:3306)/activity\"\nrooms:\n  nats_url: \"nats://nats:4222\"\n"

// TestConfigDefaults: a minimal file gets every documented default.
func TestConfigDefaults(t *testing.T) {
	clearEnv(t)
	c, err := ParseConfig([]byte(minimal))
	require.NoError(t, err)
	drain := svckit.DefaultDrainDelay
	require.Equal(t, Config{
		HTTP: HTTPConfig{Addr: DefaultHTTPAddr, AdminAddr: DefaultAdminAddr, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
			WriteTimeout: 15 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10, MaxConnections: 1024, DrainDelay: &drain},
		MySQL: MySQLConfig{DSN: "app@tcp(db:3306)/activity", MaxOpenConns: DefaultMaxOpenConns, MaxIdleConns: DefaultMaxOpenConns,
			ConnMaxLifetime: 5 * time.Minute, ConnMaxIdleTime: time.Minute, StartupTimeout: DefaultStartupTimeout},
		Rooms: RoomsConfig{NATSURL: "nats://nats:4222", Stream: "ROOMS", SubjectPrefix: "rooms", Durable: "activity", AckWait: 30 * time.Second,
			MaxAckPending: 1000, FetchBatch: 50, FetchWait: time.Second, RetryDelay: time.Second, StartupTimeout: time.Minute},
		Inbox:           InboxConfig{Retention: 168 * time.Hour, RetentionInterval: time.Minute, RetentionBatch: 1000},
		Levels:          DefaultLevels,
		Outbox:          OutboxConfig{Table: "activity_outbox", Stream: "ACTIVITY", SubjectPrefix: "activity", Retention: 168 * time.Hour},
		ShutdownTimeout: 30 * time.Second,
	}, c)
	require.Equal(t, 11, lockWaitTimeout(c.Rooms), "half of the handle timeout (3/4 of ack_wait)")
}

// TestConfigOverrides: the file's values stand, and the environment
// wins over the file, secrets from files too.
func TestConfigOverrides(t *testing.T) {
	clearEnv(t)
	file := minimal + "http:\n  addr: \":9000\"\n  drain_delay: \"0s\"\nlevels: [5, 10]\nrooms:\n  nats_url: \"nats://nats:4222\"\n  ack_wait: \"4s\"\n  durable: \"act2\"\n"
	file = strings.Replace(file, "rooms:\n  nats_url: \"nats://nats:4222\"\n", "", 1)
	c, err := ParseConfig([]byte(file))
	require.NoError(t, err)
	require.Equal(t, ":9000", c.HTTP.Addr)
	require.Equal(t, time.Duration(0), c.HTTP.DrainDelayOrDefault())
	require.Equal(t, []int64{5, 10}, c.Levels)
	require.Equal(t, "act2", c.Rooms.Durable)
	require.Equal(t, 1, lockWaitTimeout(c.Rooms), "at least a second")

	dir := t.TempDir()
	dsnFile := filepath.Join(dir, "dsn")
	require.NoError(t, os.WriteFile(dsnFile, []byte("app:pw@tcp(db2:3306)/act\n"), 0o600))
	t.Setenv(EnvMySQLDSNFile, dsnFile)
	t.Setenv(EnvNATSURL, "nats://tok3n@nats2:4222")
	t.Setenv(EnvNodeID, "pod-3")
	t.Setenv(EnvAdminAddr, "127.0.0.1:0")
	c, err = ParseConfig([]byte(file))
	require.NoError(t, err)
	require.Equal(t, "app:pw@tcp(db2:3306)/act", c.MySQL.DSN)
	require.Equal(t, "nats://tok3n@nats2:4222", c.Rooms.NATSURL)
	require.Equal(t, "pod-3", c.NodeID)
	require.Equal(t, "127.0.0.1:0", c.HTTP.AdminAddr)

	t.Setenv(EnvMySQLDSNFile, filepath.Join(dir, "missing"))
	_, err = ParseConfig([]byte(file))
	require.ErrorContains(t, err, "MYSQL_DSN_FILE="+filepath.Join(dir, "missing")+": cannot open")
}

// TestConfigValidation: each bad value fails start-up with the key named.
func TestConfigValidation(t *testing.T) {
	clearEnv(t)
	for _, c := range []struct{ yaml, want string }{
		{"rooms:\n  nats_url: \"nats://n:4222\"\n", "config: mysql.dsn: required (or set MYSQL_DSN or MYSQL_DSN_FILE)"},
		{"mysql:\n  dsn: \"a@tcp(db:3306)/x\"\n", "config: rooms.nats_url: required (or set NATS_URL or NATS_URL_FILE)"},
		{"mysql:\n  dsn: \"a@tcp(db:3306)/\"\nrooms:\n  nats_url: \"nats://n:4222\"\n", "names no database"},
		{minimal + "levels: [10, 10]\n", "config: levels [10 10]: must be positive and strictly increasing"},
		{minimal + "levels: [0]\n", "config: levels [0]"},
		{minimal + "http:\n  addr: \":1\"\n  admin_addr: \":1\"\n", `config: http.admin_addr: ":1": must differ from http.addr`},
		{minimal + "inbox:\n  retention: \"10m\"\n", "config: inbox.retention 10m0s: must be at least 1h"},
		{minimal + "outbox:\n  table: \"bad-name\"\n", "config: outbox.table"},
		{minimal + "outbox:\n  stream: \"A.B\"\n", `config: outbox.stream "A.B"`},
		{minimal + "outbox:\n  poll_interval: \"1ms\"\n", "config: outbox:"},
		{strings.Replace(minimal, "mysql:\n", "mysql:\n  max_open_conns: 1\n", 1), "config: mysql.max_open_conns 1: must be at least 2"},
		{minimal + "unknown: 1\n", "field unknown not found"},
		{minimal + "levels: \"x\"\n", "levels (line"},
	} {
		yaml := c.yaml
		_, err := ParseConfig([]byte(yaml))
		require.ErrorContains(t, err, c.want, yaml)
	}
	for _, rooms := range []struct{ set, want string }{
		{"stream: \"R S\"", `config: rooms.stream "R S"`},
		{"subject_prefix: \"rooms.>\"", "config: rooms.subject_prefix"},
		{"durable: \"a.b\"", "config: rooms.durable"},
		{"ack_wait: \"500ms\"", "config: rooms.ack_wait 500ms: must be at least 1s"},
		{"fetch_batch: 2000", "config: rooms.fetch_batch, max_ack_pending [2000 1000]"},
		{"fetch_wait: \"1m\"", "config: rooms.fetch_wait 1m0s: must be at least 10ms and below ack_wait"},
		{"nats_url: \"http://user:secret@n\"", "config: rooms.nats_url: URL 1 of 1"},
	} {
		yaml := "mysql:\n  dsn: \"app@tcp(db:3306)/activity\"\nrooms:\n  nats_url: \"nats://n:4222\"\n  " + rooms.set + "\n"
		if strings.HasPrefix(rooms.set, "nats_url") {
			yaml = "mysql:\n  dsn: \"app@tcp(db:3306)/activity\"\nrooms:\n  " + rooms.set + "\n"
		}
		_, err := ParseConfig([]byte(yaml))
		require.ErrorContains(t, err, rooms.want)
		require.NotContains(t, err.Error(), "secret")
	}
}

// TestConfigNeverPrintsSecrets formats the configuration and the blocks
// that hold secrets every way a log line or an error might.
func TestConfigNeverPrintsSecrets(t *testing.T) {
	const password, token, natsPassword = "pw-Hunter2/odd@chars", "S3CRET-token", "nats-Pa55"
	c := Config{MySQL: MySQLConfig{DSN: "app:" + password + "@tcp(db:3306)/activity"},
		Rooms: RoomsConfig{NATSURL: "nats://" + token + "@nats:4222,nats://u:" + natsPassword + "@nats2:4222"}}
	var out strings.Builder
	for _, v := range []any{c, &c, c.MySQL, &c.MySQL, c.Rooms, &c.Rooms} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			fmt.Fprintf(&out, verb+"\n", v)
		}
		var js bytes.Buffer
		slog.New(slog.NewJSONHandler(&js, nil)).Info("config", "cfg", v)
		out.WriteString(js.String())
	}
	for _, secret := range []string{password, token, natsPassword, "Hunter2"} {
		require.NotContains(t, out.String(), secret)
	}
	require.Contains(t, out.String(), "nats2:4222")
	require.Contains(t, out.String(), "tcp(db:3306)")
}

// TestRetentionBatchBoundIsThePurgeBound: a batch the inbox's Purge
// refuses must fail at start-up, not at every retention run.
func TestRetentionBatchBoundIsThePurgeBound(t *testing.T) {
	c := InboxConfig{Retention: 168 * time.Hour, RetentionInterval: time.Minute, RetentionBatch: inboxmysql.MaxPurgeBatch + 1}
	require.ErrorContains(t, validInbox(c), "inbox.retention_batch")
	c.RetentionBatch = inboxmysql.MaxPurgeBatch
	require.NoError(t, validInbox(c))
}
