package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUI serves the dashboard as an operator does, reads it, and stops it
// with SIGINT.
func TestUI(t *testing.T) {
	f := newFixture(t)
	cmd := exec.Command(binary, "ui", "--table", "room_outbox", "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), f.env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatalf("no URL printed; stderr: %s", stderr.String())
	}
	m := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/) `).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	require.NotContains(t, line, "root@", "no DSN in the output")

	resp, err := http.Get(m[1] + "records?outbox=room_outbox&view=dead")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "ErrorCode 10010: group not found")
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")

	req, err := http.NewRequest(http.MethodGet, m[1], nil)
	require.NoError(t, err)
	req.Host = "rebound.example:80"
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, "a name that is not loopback (DNS rebinding) is refused")

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		require.NoError(t, err, "exit 0 on SIGINT; stderr: %s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("ui did not stop on SIGINT")
	}
}

func TestUIRefusesRemoteAddresses(t *testing.T) {
	f := newFixture(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:80", "example.com:80"} {
		r := ctl(t, f.env, "ui", "--table", "room_outbox", "--addr", addr)
		require.Equal(t, exitUsage, r.code, addr)
		require.Contains(t, r.stderr, "--allow-remote", addr)
	}
	r := ctl(t, f.env, "ui", "--table", "room_outbox", "--addr", "nonsense")
	require.Equal(t, exitUsage, r.code)
	r = ctl(t, f.env, "ui", "--table", "no_such_table")
	require.Equal(t, exitFailed, r.code, "the table is checked before serving")
	require.True(t, strings.Contains(r.stderr, "no_such_table"), r.stderr)
}
