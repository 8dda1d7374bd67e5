package watermill_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
)

// The environment variables that point the tests at the machine's
// brokers, and their defaults (the servers this project's machines and
// CI run). Tests that need a broker fail, never skip, without one.
const (
	EnvAMQPURL       = "OUTBOXRELAY_TEST_AMQP_URL"
	DefaultAMQPURL   = "amqp://guest:guest@127.0.0.1:5672/"
	EnvRedisAddr     = "OUTBOXRELAY_TEST_REDIS_ADDR"
	DefaultRedisAddr = "127.0.0.1:6379"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// sharedAMQP is the URL of the machine's RabbitMQ; it fails t when no
// broker answers there.
func sharedAMQP(t testing.TB) string {
	t.Helper()
	url := env(EnvAMQPURL, DefaultAMQPURL)
	conn, err := amqp091.DialConfig(url, amqp091.Config{Dial: amqp091.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatalf("no RabbitMQ at %s (%v): start one (rabbitmq-server -detached), or set %s", redactURL(url), err, EnvAMQPURL)
	}
	_ = conn.Close()
	return url
}

// sharedRedis is the address of the machine's Redis; it fails t when no
// server answers there.
func sharedRedis(t testing.TB) string {
	t.Helper()
	addr := env(EnvRedisAddr, DefaultRedisAddr)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("no Redis at %s (%v): start one (redis-server), or set %s", addr, err, EnvRedisAddr)
	}
	return addr
}

func redactURL(s string) string {
	if i, j := strings.Index(s, "://"), strings.LastIndex(s, "@"); i >= 0 && j > i {
		return s[:i+3] + "…@" + s[j+1:]
	}
	return s
}

// freePort is a TCP port on loopback that nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitUntil polls cond every 20ms until it holds, or fails t after
// limit: a bound against a hang, not a timing assertion.
func waitUntil(t testing.TB, limit time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %v", what, limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// redisServer is a redis-server process of a test's own, which the test
// can kill (SIGKILL: a crash) and start again on the same port and
// data directory. It writes every stream entry to its append-only file
// before it answers (appendfsync always), so a crash loses nothing it
// acknowledged.
type redisServer struct {
	Addr     string
	password string
	dir      string
	port     int
	mu       sync.Mutex
	cmd      *exec.Cmd
}

// startRedis runs redis-server until t ends, with password (none if
// empty).
func startRedis(t testing.TB, password string) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (it is on this project's machines; apt-get install redis-server): %v", err)
	}
	s := &redisServer{password: password, dir: t.TempDir(), port: freePort(t)}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	t.Cleanup(s.Stop)
	s.Start(t)
	return s
}

// Client is a client of the server, closed when t ends.
func (s *redisServer) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.password, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Start runs the server (again after Stop, with what it held) and waits
// until it answers PING. It does nothing while the server runs.
func (s *redisServer) Start(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir, "--save", "",
		"--appendonly", "yes", "--appendfsync", "always", "--logfile", filepath.Join(s.dir, "redis.log")}
	if s.password != "" {
		args = append(args, "--requirepass", s.password)
	}
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	s.cmd = cmd
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.password, MaxRetries: -1})
	defer c.Close()
	waitUntil(t, time.Minute, "redis-server on "+s.Addr+" answers", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return c.Ping(ctx).Err()
	})
}

// Stop kills the server (SIGKILL) and waits for it to end.
func (s *redisServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// rabbitNode is a RabbitMQ node of the test binary's own (its own name,
// ports and data directory), which tests can take away (stop_app) and
// bring back (start_app) without touching the machine's broker that
// other tests use. It starts on first use, once per test binary, and
// TestMain stops it.
type rabbitNode struct {
	name, dir, pidFile string
	port               int
	// URL connects as the node's user "outbox", whose password is
	// rabbitPassword.
	URL string
}

// rabbitPassword is the password of the private node's user: the
// suite checks that it shows nowhere.
const rabbitPassword = "rabbit-Suite-pa55word-7f3a9c1e5b2d"

var (
	nodeOnce sync.Once
	node     *rabbitNode
	nodeErr  error
)

// privateRabbit is the test binary's own RabbitMQ node, started on first
// call; it fails t if the node cannot start.
func privateRabbit(t testing.TB) *rabbitNode {
	t.Helper()
	nodeOnce.Do(func() { node, nodeErr = startRabbitNode() })
	if nodeErr != nil {
		t.Fatalf("a RabbitMQ node of the tests' own (rabbitmq-server, which this project's machines have): %v", nodeErr)
	}
	return node
}

func startRabbitNode() (*rabbitNode, error) {
	if _, err := exec.LookPath("rabbitmq-server"); err != nil {
		return nil, fmt.Errorf("rabbitmq-server is not installed: %w", err)
	}
	dir, err := os.MkdirTemp("", "outboxrelay-rabbit-")
	if err != nil {
		return nil, err
	}
	// The server runs as the rabbitmq user when started as root.
	if u, err := user.Lookup("rabbitmq"); err == nil && os.Geteuid() == 0 {
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	ports := make([]int, 2)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
	}
	n := &rabbitNode{name: fmt.Sprintf("outboxrelay-test-%d@localhost", os.Getpid()), dir: dir,
		pidFile: filepath.Join(dir, "pid"), port: ports[0]}
	n.URL = fmt.Sprintf("amqp://outbox:%s@127.0.0.1:%d/", rabbitPassword, n.port)
	conf := filepath.Join(dir, "rabbitmq.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "listeners.tcp.default = 127.0.0.1:%d\n", n.port), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("rabbitmq-server", "-detached")
	cmd.Env = append(os.Environ(), "RABBITMQ_NODENAME="+n.name, fmt.Sprintf("RABBITMQ_NODE_PORT=%d", n.port),
		fmt.Sprintf("RABBITMQ_DIST_PORT=%d", ports[1]), "RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"), "RABBITMQ_PID_FILE="+n.pidFile,
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "plugins"), "RABBITMQ_CONFIG_FILE="+conf)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("rabbitmq-server -detached: %w: %s", err, out)
	}
	if err := n.ctl("wait", "--timeout", "180", n.pidFile); err != nil {
		_ = n.stop()
		return nil, err
	}
	for _, args := range [][]string{{"add_user", "outbox", rabbitPassword}, {"set_permissions", "-p", "/", "outbox", ".*", ".*", ".*"}} {
		if err := n.ctl(args...); err != nil {
			_ = n.stop()
			return nil, err
		}
	}
	return n, nil
}

// ctl runs rabbitmqctl against the node.
func (n *rabbitNode) ctl(args ...string) error {
	out, err := exec.Command("rabbitmqctl", append([]string{"-n", n.name}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("rabbitmqctl %s: %w: %s", args[0], err, strings.ReplaceAll(string(out), rabbitPassword, "[redacted]"))
	}
	return nil
}

// Stop stops the broker (the rabbit application; the Erlang node stays,
// as a broker's host does), and Start starts it again with its durable
// queues and their persistent messages.
func (n *rabbitNode) Stop(t testing.TB) {
	t.Helper()
	if err := n.ctl("stop_app"); err != nil {
		t.Fatal(err)
	}
}

func (n *rabbitNode) Start(t testing.TB) {
	t.Helper()
	if err := n.ctl("start_app"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, time.Minute, "the private RabbitMQ node takes connections", func() error {
		c, err := amqp091.Dial(n.URL)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
}

// Freeze stops the node's Erlang VM (SIGSTOP): the broker keeps its
// connections open but answers nothing, as a broker in a long pause or
// behind a black-holed network does; Thaw lets it go on (SIGCONT). The
// tests' AMQP connections use a heartbeat of a minute, longer than a
// freeze lasts, so that no connection drops: watermill-amqp v3.0.2 has a
// data race on reconnecting (ThreeDotsLabs/watermill issue 693), which
// -race reports. TestBrokerStopsAndStarts, built without -race, drops
// the connections for real.
func (n *rabbitNode) Freeze(t testing.TB) { n.signal(t, syscall.SIGSTOP) }

func (n *rabbitNode) Thaw(t testing.TB) { n.signal(t, syscall.SIGCONT) }

func (n *rabbitNode) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	b, err := os.ReadFile(n.pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("the node's pid file: %v", err)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("signal %v to the RabbitMQ node (pid %d): %v", sig, pid, err)
	}
}

// stop ends the node and removes its directory.
func (n *rabbitNode) stop() error {
	if b, err := os.ReadFile(n.pidFile); err == nil { // in case a test ended while it was frozen
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	err := n.ctl("stop", n.pidFile)
	_ = os.RemoveAll(n.dir)
	return err
}

// stopPrivateRabbit stops the node if the tests started one.
func stopPrivateRabbit() error {
	if node == nil {
		return nil
	}
	return node.stop()
}
