package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/outboxui"
)

// uiShutdown bounds how long ui waits for requests in flight when it
// stops.
const uiShutdown = 5 * time.Second

func runUI(c *cli, args []string) int {
	fs := c.flags("[--addr 127.0.0.1:0] [--read-only] [--allow-remote]")
	addr := fs.String("addr", "127.0.0.1:0", "address to serve on; a loopback address unless --allow-remote (port 0: any free port)")
	readOnly := fs.Bool("read-only", false, "switch every action (requeue) off")
	allowRemote := fs.Bool("allow-remote", false, "allow an address other than loopback: anyone who reaches it can see payloads and requeue, and there is no login")
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	if len(c.args) > 0 {
		return c.usageError("unexpected argument %q", safe(c.args[0], false))
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return c.usageError("--addr %q: %v", safe(*addr, false), err)
	}
	loopback := isLoopback(host)
	if !loopback && !*allowRemote {
		return c.usageError("--addr %q is not a loopback address: the dashboard has no login; pass --allow-remote to serve it there anyway", safe(*addr, false))
	}
	if code, ok := c.connect(); !ok {
		return code
	}
	defer c.close()
	ui, err := outboxui.New(outboxui.Options{
		Outboxes: []outboxui.Outbox{outboxui.MySQL(c.store)}, ReadOnly: *readOnly, QueryTimeout: c.timeout,
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
	var h http.Handler = ui
	if loopback {
		h = loopbackHostOnly(ui)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	url := "http://" + ln.Addr().String() + "/"
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

// loopbackHostOnly refuses requests whose Host is not a loopback name or
// address, so that a web page elsewhere cannot reach the dashboard by
// pointing a name of its own at 127.0.0.1 (DNS rebinding).
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if !isLoopback(host) {
			http.Error(w, "this dashboard answers on a loopback address only", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}
