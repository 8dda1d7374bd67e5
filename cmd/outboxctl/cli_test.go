package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
)

func TestVersion(t *testing.T) {
	r := ctl(t, nil, "version")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "module github.com/outboxrelay/outboxrelay/cmd/outboxctl\n")
	require.Contains(t, r.stdout, "library github.com/outboxrelay/outboxrelay ")
	require.Regexp(t, `(?m)^go1\.`, r.stdout)

	r = ctl(t, nil, "version", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	require.Equal(t, "github.com/outboxrelay/outboxrelay/cmd/outboxctl", v["module"])
	require.NotEmpty(t, v["library"])
	require.NotEmpty(t, v["version"])
	require.True(t, strings.HasPrefix(v["go_version"].(string), "go1."), v["go_version"])
	require.Contains(t, v, "vcs_modified")
	// This machine builds with -buildvcs=false; where VCS stamping is on,
	// the revision is a full commit hash.
	if rev, ok := v["vcs_revision"]; ok {
		require.Regexp(t, `^[0-9a-f]{40,64}$`, rev)
	}
	require.Equal(t, exitUsage, ctl(t, nil, "version", "extra").code)
}

func TestHelpCommand(t *testing.T) {
	for name, cmd := range commands {
		for _, args := range [][]string{{"help", name}, {name, "-h"}, {name, "--help"}} {
			r := ctl(t, nil, args...)
			require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
			require.True(t, strings.HasPrefix(r.stdout, "usage: outboxctl "+name+" "), "%v prints %s's usage, not the global one:\n%s", args, name, r.stdout)
			require.Contains(t, r.stdout, cmd.summary, args)
			require.Contains(t, r.stdout, "-json", args)
			require.Contains(t, r.stdout, "exit codes", args)
		}
	}
	require.Contains(t, ctl(t, nil, "help", "requeue").stdout, "-error-contains")
	require.Contains(t, ctl(t, nil, "help", "stats").stdout, "-timeout")

	r := ctl(t, nil, "help")
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stdout, "usage: outboxctl <command>")
	require.Contains(t, r.stdout, "exit codes")

	r = ctl(t, nil, "help", "frobnicate")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `unknown command "frobnicate"`)
	require.Equal(t, exitUsage, ctl(t, nil, "help", "stats", "list").code)
}

// jsonError reads the single JSON error object a command printed on
// stderr under --json.
func readJSONError(t *testing.T, r result) jsonError {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.stderr))
	dec.DisallowUnknownFields()
	var e struct {
		Error *jsonError `json:"error"`
	}
	require.NoError(t, dec.Decode(&e), "stderr is not a JSON error object:\n%s", r.stderr)
	require.NotNil(t, e.Error, r.stderr)
	require.False(t, dec.More(), "one object only:\n%s", r.stderr)
	return *e.Error
}

func TestJSONErrors(t *testing.T) {
	f := newFixture(t)
	noDB := []string{"OUTBOXCTL_DSN=", "MYSQL_DSN="}
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"unknown command", f.env, []string{"frobnicate", "--json"}, exitUsage, "frobnicate"},
		{"bad flag before --json", f.env, []string{"stats", "--no-such-flag", "--json"}, exitUsage, "no-such-flag"},
		{"bad flag value", f.env, []string{"purge", "--json", "--older-than", "soon"}, exitUsage, "soon"},
		{"bad argument", f.env, []string{"list", "--table", "room_outbox", "--status", "lost", "--json"}, exitUsage, `--status \"lost\"`},
		{"no database", noDB, []string{"stats", "--json"}, exitUsage, "no database"},
		{"connection refused", nil, []string{"stats", "--dsn", "root@tcp(127.0.0.1:1)/x", "--json"}, exitFailed, "cannot reach"},
		{"missing table", f.env, []string{"stats", "--table", "no_such_table", "--json"}, exitFailed, "does not exist"},
		{"not found", f.env, []string{"show", "nope", "--table", "room_outbox", "--json"}, exitNotFound, "nope"},
		{"not confirmed", f.env, []string{"requeue", "d-1", "--table", "room_outbox", "--json"}, exitUnconfirmed, "--yes"},
		{"conflict", f.env, []string{"requeue", "p-1", "--table", "room_outbox", "--yes", "--json"}, exitConflict, "not dead"},
		{"help of an unknown command", f.env, []string{"help", "frobnicate", "--json"}, exitUsage, "frobnicate"},
	}
	for _, tc := range cases {
		r := ctl(t, tc.env, tc.args...)
		require.Equal(t, tc.code, r.code, "%s: %s", tc.name, r.stderr)
		e := readJSONError(t, r)
		require.Equal(t, exitName(tc.code), e.Code, tc.name)
		require.Equal(t, tc.code, e.ExitCode, tc.name)
		require.Contains(t, r.stderr, tc.want, tc.name)
		require.NotContains(t, r.stderr, "usage:", "%s: no usage text in a JSON error", tc.name)
		if r.stdout != "" {
			require.True(t, json.Valid([]byte(r.stdout)), "%s: stdout is JSON too:\n%s", tc.name, r.stdout)
		}
	}
}

// dataMaps are JSON keys whose values are maps keyed by data (event
// types, header names), not by field names.
var dataMaps = map[string]bool{"by_type": true, "headers": true}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// requireSnakeCase checks every field name in v, decoded JSON.
func requireSnakeCase(t *testing.T, what string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			require.Regexp(t, snakeCase, k, "%s: key %q", what, k)
			if dataMaps[k] {
				if m, ok := val.(map[string]any); ok {
					for _, inner := range m {
						requireSnakeCase(t, what, inner)
					}
				}
				continue
			}
			requireSnakeCase(t, what, val)
		}
	case []any:
		for _, e := range v {
			requireSnakeCase(t, what, e)
		}
	}
}

func TestJSONKeysAreSnakeCase(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.store.AddConsumer(context.Background(), "audit", 2 /* mysql.StartBeginning */))
	tbl := []string{"--table", "room_outbox", "--json"}
	runs := [][]string{
		{"stats"}, {"list"}, {"list", "--status", "dead"}, {"show", "p-1"}, {"show", "d-1", "--full"},
		{"show", "p-1", "--consumer", "audit"}, {"consumers"},
		{"requeue", "--all", "--dry-run"}, {"purge", "--older-than", "720h", "--dry-run"},
		{"requeue", "d-1", "--yes"}, {"requeue", "--all", "--yes"}, {"purge", "--older-than", "720h", "--yes"},
		{"consumers", "add", "later", "--from", "now", "--yes"}, {"consumers", "remove", "audit", "--yes"},
	}
	for _, args := range runs {
		r := ctl(t, f.env, append(args, tbl...)...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
		var v any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), "%v: %s", args, r.stdout)
		requireSnakeCase(t, strings.Join(args, " "), v)
	}
	r := ctl(t, nil, "version", "--json")
	var v any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	requireSnakeCase(t, "version", v)
}

func TestExitCodes(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.store.AddConsumer(context.Background(), "audit", 1 /* mysql.StartNow */))
	tbl := []string{"--table", "room_outbox"}
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"ok", []string{"stats"}, exitOK},
		{"dry run", []string{"requeue", "d-1", "--dry-run"}, exitOK},
		{"failed: missing table", []string{"stats", "--table", "no_such_table"}, exitFailed},
		{"usage", []string{"stats", "--no-such-flag"}, exitUsage},
		{"usage: --timeout not positive", []string{"stats", "--timeout", "0s"}, exitUsage},
		{"not confirmed", []string{"requeue", "d-1"}, exitUnconfirmed},
		{"not found: record", []string{"show", "nope"}, exitNotFound},
		{"not found: record, --yes", []string{"requeue", "nope", "--yes"}, exitNotFound},
		{"not found: consumer", []string{"consumers", "remove", "nobody"}, exitNotFound},
		{"not found: consumer, --yes", []string{"consumers", "remove", "nobody", "--yes"}, exitNotFound},
		{"not found: consumer, --dry-run", []string{"consumers", "remove", "nobody", "--dry-run"}, exitNotFound},
		{"conflict: not dead", []string{"requeue", "p-1", "--yes"}, exitConflict},
		{"conflict: not dead, unconfirmed", []string{"requeue", "p-1"}, exitConflict},
		{"conflict: consumer exists", []string{"consumers", "add", "audit", "--from", "now", "--yes"}, exitConflict},
	}
	for _, tc := range cases {
		// The table first, so that a case's own --table wins.
		args := append(append([]string{tc.args[0]}, tbl...), tc.args[1:]...)
		r := ctl(t, f.env, args...)
		require.Equal(t, tc.code, r.code, "%s: %v: %s", tc.name, tc.args, r.stderr)
	}
	require.Equal(t, outbox.StatusDead, f.status(t, "d-1"), "nothing changed")
	// The codes are documented where a user looks.
	usage := ctl(t, nil, "help").stdout
	for code, e := range exitCodes {
		require.Regexp(t, fmt.Sprintf(`(?m)^  %d %s\s+%s$`, code, e.name, regexp.QuoteMeta(e.meaning)), usage)
	}
}

// ctlWithin is ctl that kills outboxctl and fails the test if it has not
// returned within d: for commands that must not hang.
func ctlWithin(t *testing.T, d time.Duration, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	_ = cmd.Run()
	require.NoError(t, ctx.Err(), "outboxctl %v did not return: %s", args, errOut.String())
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
}

// TestTimeoutOnALockedRow holds a lock on records in a transaction and
// runs commands that need them with --timeout 1s: each gives up with the
// timeout code and a clear message, and changes nothing.
func TestTimeoutOnALockedRow(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tx, err := f.db.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	_, err = tx.ExecContext(ctx, "SELECT event_id FROM room_outbox WHERE event_id IN ('d-1', 'old-1') FOR UPDATE")
	require.NoError(t, err)

	tbl := []string{"--table", "room_outbox", "--timeout", "1s"}
	r := ctlWithin(t, 2*time.Minute, f.env, append([]string{"requeue", "d-1", "--yes"}, tbl...)...)
	require.Equal(t, exitTimeout, r.code, r.stderr)
	require.Contains(t, r.stderr, "timed out after 1s (--timeout)")

	r = ctlWithin(t, 2*time.Minute, f.env, append([]string{"purge", "--older-than", "720h", "--yes", "--json"}, tbl...)...)
	require.Equal(t, exitTimeout, r.code, r.stderr)
	e := readJSONError(t, r)
	require.Equal(t, "timeout", e.Code)
	require.Contains(t, e.Message, "timed out after 1s")

	require.NoError(t, tx.Rollback())
	require.Equal(t, outbox.StatusDead, f.status(t, "d-1"))
	require.Equal(t, outbox.StatusPublished, f.status(t, "old-1"))
	// Unlocked, the same commands succeed.
	require.Equal(t, exitOK, ctl(t, f.env, append([]string{"requeue", "d-1", "--yes"}, tbl...)...).code)
}
