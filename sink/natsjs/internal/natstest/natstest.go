// Package natstest gives the NATS sink's tests a real NATS server: the
// shared one with JetStream, or nats-server processes of a test's own.
// It lives in the natsjs module, with nats.go, so that the root module
// does not require nats.go for tests.
package natstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// EnvNATSURL names the environment variable that points tests at a NATS
// server with JetStream enabled; DefaultNATSURL is used without it (the
// server this project's machines run).
const (
	EnvNATSURL     = "OUTBOXRELAY_TEST_NATS_URL"
	DefaultNATSURL = "nats://127.0.0.1:4222"
)

// NATS connects to the test NATS server, closed when t ends. It fails t,
// never skips, when there is no server or it has no JetStream.
func NATS(t testing.TB) *nats.Conn {
	t.Helper()
	url := os.Getenv(EnvNATSURL)
	if url == "" {
		url = DefaultNATSURL
	}
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second), nats.NoReconnect())
	if err != nil {
		t.Fatalf("no NATS server at %s (%v): start one with JetStream (nats-server -js), or set %s", url, err, EnvNATSURL)
	}
	t.Cleanup(nc.Close)
	return nc
}

// NATSServer is a nats-server process of a test's own, for what the
// shared server cannot do: authorization rules, no JetStream, going down.
type NATSServer struct {
	// Addr is host:port to connect to.
	Addr string
	bin  string // the nats-server binary
	conf string // its configuration file
	log  string // where it writes its log
	cmd  *exec.Cmd
}

// StartNATSServer runs the nats-server binary (from PATH, or
// /usr/sbin/nats-server) with config, a nats-server configuration to which
// the listen address (and, for "jetstream {}", a store directory) is
// added, until t ends. It fails t if the binary is missing or the server
// does not come up.
func StartNATSServer(t testing.TB, config string) *NATSServer {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		bin = "/usr/sbin/nats-server"
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("nats-server is not installed (it is on this project's machines): %v", err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	config = strings.ReplaceAll(config, "jetstream {}", fmt.Sprintf("jetstream { store_dir: %q }", filepath.Join(dir, "js")))
	file := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(file, []byte(fmt.Sprintf("host: 127.0.0.1\nport: %s\n%s\n", port, config)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &NATSServer{Addr: addr, bin: bin, conf: file, log: filepath.Join(dir, "nats.log")}
	t.Cleanup(s.Stop)
	s.Start(t)
	return s
}

// Start runs the server again after Stop, on the same address and with
// the same JetStream store (what its streams held is still there). It
// fails t if the server does not come up. It does nothing while the
// server runs.
func (s *NATSServer) Start(t testing.TB) {
	t.Helper()
	if s.cmd != nil && s.cmd.ProcessState == nil {
		return
	}
	logFile, err := os.OpenFile(s.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	s.cmd = exec.Command(s.bin, "-c", s.conf)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	// A bound against a hang, not a timing assertion: a loaded machine
	// may take a while to start it and recover its JetStream store.
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(s.log)
			t.Fatalf("nats-server did not come up on %s: %v\n%s", s.Addr, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server and waits for it to exit.
func (s *NATSServer) Stop() {
	if s.cmd == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
