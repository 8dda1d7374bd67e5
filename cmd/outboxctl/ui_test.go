package main

import (
	"bufio"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// startUI runs outboxctl ui with args as an operator does and returns
// the URL it prints, its stderr so far, and a stop that sends SIGINT and
// requires exit 0.
func startUI(t *testing.T, f fixture, args ...string) (string, *outboxtest.LogBuffer, func()) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"ui", "--table", "room_outbox"}, args...)...)
	cmd.Env = append(os.Environ(), f.env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &outboxtest.LogBuffer{}
	cmd.Stderr = stderr
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
	require.NotNil(t, m, "%s; stderr: %s", line, stderr.String())
	require.NotContains(t, line, "root@", "no DSN in the output")
	stop := func() {
		t.Helper()
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			require.NoError(t, err, "exit 0 on SIGINT; stderr: %s", stderr.String())
		case <-time.After(30 * time.Second):
			t.Fatal("ui did not stop on SIGINT")
		}
	}
	return m[1], stderr, stop
}

// TestUI serves the dashboard as an operator does, reads it, and stops it
// with SIGINT.
func TestUI(t *testing.T) {
	f := newFixture(t)
	base, _, stop := startUI(t, f, "--addr", "127.0.0.1:0")
	resp, err := http.Get(base + "records?outbox=room_outbox&view=dead")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "ErrorCode 10010: group not found")
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")

	r := testutil.RequestAs(t, http.MethodGet, base, "rebound.example:80", nil)
	require.Equal(t, http.StatusMisdirectedRequest, r.Code, "a name that is not loopback (DNS rebinding) is refused")
	stop()
}

// TestUIHostCheck: on every interface (--allow-remote), as on loopback,
// a rebinding page's Host gets 421 for the dead letters, a record and a
// requeue, even with a session and its token; loopback names and the
// --allow-host names are served; a bad --allow-host is a usage error.
func TestUIHostCheck(t *testing.T) {
	f := newFixture(t)
	for _, args := range [][]string{
		{"--addr", "0.0.0.0:0", "--allow-remote"},
		{"--addr", "0.0.0.0:0", "--allow-remote", "--read-only"},
		{"--addr", "127.0.0.1:0", "--allow-host", "dash.example.com", "--allow-host", "2001:db8::1"},
	} {
		base, stderr, stop := startUI(t, f, args...)
		port := base[strings.LastIndexByte(base, ':') : len(base)-1]
		// The rebinding page is given a session and its token anyway, to
		// show that its requests are refused for their Host alone.
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		resp, err := (&http.Client{Jar: jar}).Get(base + "records?outbox=room_outbox&view=dead")
		require.NoError(t, err)
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%v", args)
		token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(string(page))
		require.NotNil(t, token, "%v", args)
		u, err := url.Parse(base)
		require.NoError(t, err)
		session := jar.Cookies(u)
		require.Len(t, session, 1)
		form := url.Values{"csrf": {token[1]}, "outbox": {"room_outbox"}, "scope": {"one"}, "id": {"b64:ZC0x"}, "confirm": {"yes"}} // d-1

		for _, host := range []string{"rebind.attacker.example" + port, "rebind.attacker.example", "dash.example.com.attacker.example" + port, "[2001:db8::2]" + port} {
			for _, path := range []string{"", "records?outbox=room_outbox&view=dead", "record?outbox=room_outbox&id=d-1"} {
				r := testutil.RequestAs(t, http.MethodGet, base+path, host, nil)
				require.Equal(t, http.StatusMisdirectedRequest, r.Code, "%v: GET /%s with Host %s", args, path, host)
				require.NotContains(t, r.Body, "10010", host)
			}
			r := testutil.RequestAs(t, http.MethodPost, base+"requeue", host, form, session...)
			require.Equal(t, http.StatusMisdirectedRequest, r.Code, "%v: POST with Host %s", args, host)
			require.Equal(t, outbox.StatusDead, f.status(t, "d-1"), "%v: nothing requeued", args)
		}
		served := []string{"localhost" + port, "[::1]" + port}
		if slices.Contains(args, "--allow-host") {
			served = append(served, "dash.example.com"+port, "DASH.example.com.", "[2001:db8::1]"+port)
		} else {
			require.Contains(t, stderr.String(), "--allow-host", "the operator is told how to open it under other names")
		}
		for _, host := range served {
			r := testutil.RequestAs(t, http.MethodGet, base+"record?outbox=room_outbox&id=d-1", host, nil)
			require.Equal(t, http.StatusOK, r.Code, "%v: Host %s", args, host)
			require.Contains(t, r.Body, "10010", host)
		}
		stop()
		require.Contains(t, stderr.String(), "rebind.attacker.example", "the refusals are logged")
	}

	for _, bad := range []string{"example.com:80", "*.example.com", "exa mple"} {
		r := ctl(t, f.env, "ui", "--table", "room_outbox", "--allow-host", bad)
		require.Equal(t, exitUsage, r.code, bad)
		require.Contains(t, r.stderr, "-allow-host", bad)
		require.Contains(t, r.stderr, bad)
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
