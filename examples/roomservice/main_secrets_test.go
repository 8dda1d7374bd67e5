package main

import (
	"bytes"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// The password of the DSNs below: a "/" and an "@" in it, as generated
// passwords have, and long pieces, so that a fragment of it (the driver
// can quote the part before the "/") is found too.
const (
	password      = "s3cr3tA/p4ssB@w0rdC"
	dsnNoServer   = "app:" + password + "@tcp(127.0.0.1:1)/rooms"
	dsnNoDatabase = "app:" + password + "@tcp(127.0.0.1:1)"
)

// requireNoPassword fails when out holds the password or a piece of it.
func requireNoPassword(t *testing.T, out string) {
	t.Helper()
	for _, piece := range []string{password, "s3cr3tA", "p4ssB", "w0rdC"} {
		require.NotContains(t, out, piece, "the DSN's password is printed:\n%s", out)
	}
}

// buildBinary builds the command at pkg (relative to this directory)
// into a directory of the test's and returns its path.
func buildBinary(t *testing.T, pkg string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cmd")
	out, err := exec.Command("go", "build", "-o", path, pkg).CombinedOutput()
	require.NoError(t, err, "build %s:\n%s", pkg, out)
	return path
}

// runBinary runs bin with args and env added to a clean environment
// (no MYSQL_DSN of the caller's) and returns its exit code and output.
func runBinary(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v", bin, err)
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// imEnv is a Tencent IM configuration from the environment alone; the
// base URL is never reached, as MySQL fails first.
var imEnv = []string{
	"TENCENT_IM_BASE_URL=http://127.0.0.1:1", "TENCENT_IM_SDK_APP_ID=1400000000",
	"TENCENT_IM_ADMIN_IDENTIFIER=administrator", "TENCENT_IM_SECRET_KEY=im-key",
}

// watermillEnv chooses the Watermill sink with the password in the AMQP
// URL (escaped, as a URL's user information must be).
var watermillEnv = []string{"MYSQL_DSN=" + dsnNoServer, "ROOMSERVICE_SINK_KIND=watermill",
	"WATERMILL_AMQP_URL=amqp://app:" + url.QueryEscape(password) + "@127.0.0.1:1/"}

// TestBinariesNeverPrintTheDSNPassword runs room-service and the demo
// command with a DSN password in the environment, as operators do, and
// checks that neither usage text nor any error shows it.
func TestBinariesNeverPrintTheDSNPassword(t *testing.T) {
	dir := t.TempDir()
	dsnFile := filepath.Join(dir, "dsn")
	require.NoError(t, os.WriteFile(dsnFile, []byte(dsnNoServer+"\n"), 0o600))
	// A config file that waits for MySQL a second, not the default minute.
	quick := filepath.Join(dir, "quick.yaml")
	require.NoError(t, os.WriteFile(quick, []byte("mysql:\n  startup_timeout: 1s\n"), 0o600))
	// The wrong password needs a first answer from the server: under load
	// a second can pass before the dial does, leaving only "i/o timeout".
	// The wait retries until its end and reports the last answer.
	patient := filepath.Join(dir, "patient.yaml")
	require.NoError(t, os.WriteFile(patient, []byte("mysql:\n  startup_timeout: 5s\n"), 0o600))
	server, err := mysqldrv.ParseDSN(testutil.ServerDSN(t))
	require.NoError(t, err)
	wrongPass := "nosuchuser:" + password + "@tcp(" + server.Addr + ")/rooms"
	inFile := filepath.Join(dir, "in-file.yaml")
	require.NoError(t, os.WriteFile(inFile, []byte("mysql:\n  dsn: \""+dsnNoDatabase+"\"\n"), 0o600))

	t.Run("roomservice", func(t *testing.T) {
		t.Parallel()
		bin := buildBinary(t, ".")
		cases := []struct {
			name     string
			env      []string
			args     []string
			code     int
			contains string
		}{
			{"help", []string{"MYSQL_DSN=" + dsnNoServer}, []string{"-h"}, 0, "MYSQL_DSN"},
			{"demo", []string{"MYSQL_DSN=" + dsnNoServer}, []string{"-demo"}, 2, "go run ./examples/roomservice/demo"},
			{"bad flag", []string{"MYSQL_DSN=" + dsnNoServer}, []string{"-no-such-flag"}, 2, "MYSQL_DSN"},
			{"no server, DSN from MYSQL_DSN", append([]string{"MYSQL_DSN=" + dsnNoServer}, imEnv...), []string{"-config", quick}, 1, "app@tcp(127.0.0.1:1)/rooms"},
			{"no server, DSN from MYSQL_DSN_FILE", append([]string{"MYSQL_DSN_FILE=" + dsnFile}, imEnv...), []string{"-config", quick}, 1, "app@tcp(127.0.0.1:1)/rooms"},
			{"wrong password", append([]string{"MYSQL_DSN=" + wrongPass}, imEnv...), []string{"-config", patient}, 1, "Access denied"},
			{"no database, DSN from MYSQL_DSN", append([]string{"MYSQL_DSN=" + dsnNoDatabase}, imEnv...), nil, 1, "mysql.dsn: does not parse"},
			{"no database, DSN in the file", imEnv, []string{"-config", inFile}, 1, "mysql.dsn: does not parse"},
			{"watermill URL in the environment, help", watermillEnv, []string{"-h"}, 0, "WATERMILL_AMQP_URL"},
			{"watermill URL in the environment, bad config", append([]string{"WATERMILL_REDIS_PASSWORD=" + password}, watermillEnv...),
				[]string{"-config", quick}, 1, "config: sink.watermill.broker: required with sink.kind watermill"},
		}
		for _, tc := range cases {
			code, out := runBinary(t, bin, tc.env, tc.args...)
			requireNoPassword(t, out)
			require.Equal(t, tc.code, code, "%s: exit code; output:\n%s", tc.name, out)
			require.Contains(t, out, tc.contains, tc.name)
		}
	})
	t.Run("demo", func(t *testing.T) {
		t.Parallel()
		bin := buildBinary(t, "./demo")
		for _, args := range [][]string{{"-h"}, {"-no-such-flag"}} {
			_, out := runBinary(t, bin, []string{"MYSQL_DSN=" + dsnNoServer}, args...)
			requireNoPassword(t, out)
			require.Contains(t, out, "$MYSQL_DSN", "usage names the variable")
		}
	})
}
