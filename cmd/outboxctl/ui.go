package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/outboxui"
)

// uiShutdown bounds how long ui waits for requests in flight when it
// stops.
const uiShutdown = 5 * time.Second

func runUI(c *cli, args []string) int {
	fs := c.flags("[--addr 127.0.0.1:0] [--read-only] [--allow-remote] [--allow-host NAME]...")
	addr := fs.String("addr", "127.0.0.1:0", "address to serve on; a loopback address unless --allow-remote (port 0: any free port)")
	readOnly := fs.Bool("read-only", false, "switch every action (requeue) off")
	allowRemote := fs.Bool("allow-remote", false, "allow an address other than loopback: anyone who reaches it can see payloads and requeue, and there is no login")
	flagged := allowHostFlag(fs)
	if code, ok := c.parseNoArgs(fs, args, c.tableInDB); !ok {
		return code
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return c.usageError("--addr %q: %v", safe(*addr, false), err)
	}
	if !isLoopback(host) && !*allowRemote {
		return c.usageError("--addr %q is not a loopback address: the dashboard has no login; pass --allow-remote to serve it there anyway", safe(*addr, false))
	}
	hosts := slices.Clone(*flagged)
	if served(host) && outboxui.CheckHost(host) == nil {
		hosts = append(hosts, host) // the address it is opened at
	}
	if !isLoopback(host) && len(hosts) == 0 {
		fmt.Fprintln(c.errOut, "outboxctl ui: it answers to loopback names only (localhost, 127.0.0.1, [::1]): name the others it is opened under with --allow-host")
	}
	if code, ok := c.connect(); !ok {
		return code
	}
	defer c.close()
	ui, err := outboxui.New(outboxui.Options{
		Outboxes: []outboxui.Outbox{c.store}, ReadOnly: *readOnly, QueryTimeout: c.timeout, AllowedHosts: hosts,
		Logger: slog.New(slog.NewTextHandler(c.errOut, nil)),
	})
	if err != nil {
		return c.fail(exitFailed, err)
	}
	defer ui.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return c.fail(exitFailed, fmt.Errorf("listen on %s: %w", *addr, err))
	}
	srv := &http.Server{Handler: ui, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	url := "http://" + openAt(ln.Addr()) + "/"
	if c.json {
		_ = c.printJSON(map[string]any{"url": url, "table": c.table, "read_only": *readOnly})
	} else {
		fmt.Fprintf(c.out, "outboxctl ui: table %s at %s (Ctrl-C stops)\n", c.table, url)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return c.fail(exitFailed, fmt.Errorf("serve: %w", err))
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), uiShutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return c.fail(exitFailed, fmt.Errorf("stop: %w", err))
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return c.fail(exitFailed, fmt.Errorf("serve: %w", err))
	}
	return exitOK
}

// isLoopback reports whether host (of an address) is a loopback one:
// localhost or a loopback IP. "" (every interface) is not.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// allowHostFlag defines --allow-host, which may be repeated, on fs and
// returns its values, each checked as it is parsed.
func allowHostFlag(fs *flag.FlagSet) *[]string {
	var hosts []string
	fs.Func("allow-host", "a host name or IP address, besides loopback and --addr's, that the dashboard answers to (the name in the browser's "+
		"address bar, without a port; repeat for more): any other Host is refused (421), so that a web page cannot reach it by DNS rebinding",
		func(v string) error {
			if err := outboxui.CheckHost(v); err != nil {
				return err
			}
			hosts = append(hosts, v)
			return nil
		})
	return &hosts
}

// served reports whether the host of --addr is one that a browser can
// be pointed at, and so one the dashboard answers to: not loopback
// (always served), not empty or unspecified (every interface: the
// operator names the ones used with --allow-host).
func served(host string) bool {
	if host == "" || isLoopback(host) {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsUnspecified()
}

// openAt is the host:port of the URL to print for a listener: its own,
// or 127.0.0.1's for every interface (0.0.0.0 and :: listen on both
// families), which no browser sends as a Host the dashboard answers to.
func openAt(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port))
	}
	return a.String()
}
