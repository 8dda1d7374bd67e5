package svckit

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// HTTP is the listener part of a service's http block: the public
// listener, the admin listener (/metrics and the probes), the server's
// limits and the drain delay. A service inlines it in its own block
// (yaml:",inline") beside its own keys.
type HTTP struct {
	// Addr is the public listener's address. Its default is the
	// service's.
	Addr string `yaml:"addr"`
	// AdminAddr serves /metrics, /healthz and /readyz for operators. Its
	// default is the service's, on loopback, so that only the host (or a
	// sidecar) reaches it; set ":PORT" where a scraper must.
	AdminAddr string `yaml:"admin_addr"`
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are
	// the http.Server's (defaults 5s, 10s, 15s, 60s): a client that sends
	// its headers or body too slowly, or idles on a keep-alive
	// connection, is cut off.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	WriteTimeout      time.Duration `yaml:"write_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes bounds a request's headers. Defaults to 16 KiB.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxConnections caps the public listener's open connections; more
	// wait in the kernel's backlog. Defaults to 1024.
	MaxConnections int `yaml:"max_connections"`
	// DrainDelay is how long /readyz answers 503 before the server stops
	// taking connections, so that load balancers (Kubernetes endpoints)
	// stop sending first. Defaults to 5s; 0s is allowed (tests, local).
	DrainDelay *time.Duration `yaml:"drain_delay"`
}

// The defaults HTTP.WithDefaults fills in.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 15 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxHeaderBytes    = 16 << 10
	DefaultMaxConnections    = 1024
	DefaultDrainDelay        = 5 * time.Second
)

// WithDefaults returns h with the service's addresses and the documented
// defaults filled in for every zero value.
func (h HTTP) WithDefaults(addr, adminAddr string) HTTP {
	OrDefault(&h.Addr, addr)
	OrDefault(&h.AdminAddr, adminAddr)
	OrDefault(&h.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	OrDefault(&h.ReadTimeout, DefaultReadTimeout)
	OrDefault(&h.WriteTimeout, DefaultWriteTimeout)
	OrDefault(&h.IdleTimeout, DefaultIdleTimeout)
	OrDefault(&h.MaxHeaderBytes, DefaultMaxHeaderBytes)
	OrDefault(&h.MaxConnections, DefaultMaxConnections)
	if h.DrainDelay == nil {
		d := DefaultDrainDelay
		h.DrainDelay = &d
	}
	return h
}

// DrainDelayOrDefault is http.drain_delay, the default when unset.
func (h HTTP) DrainDelayOrDefault() time.Duration {
	if h.DrainDelay == nil {
		return DefaultDrainDelay
	}
	return *h.DrainDelay
}

// Validate checks the block; every error names its key (http.…).
func (h HTTP) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"read_header_timeout", h.ReadHeaderTimeout}, {"read_timeout", h.ReadTimeout},
		{"write_timeout", h.WriteTimeout}, {"idle_timeout", h.IdleTimeout}, {"drain_delay", h.DrainDelayOrDefault()},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("config: http.%s: %v: must not be negative", d.name, d.v))
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"max_header_bytes", h.MaxHeaderBytes}, {"max_connections", h.MaxConnections}} {
		if n.v < 0 {
			errs = append(errs, fmt.Errorf("config: http.%s: %d: must not be negative", n.name, n.v))
		}
	}
	// Port 0 picks a free port for each, so the same ":0" is fine.
	if h.Addr != "" && h.Addr == h.AdminAddr && !strings.HasSuffix(h.Addr, ":0") {
		errs = append(errs, fmt.Errorf("config: http.admin_addr: %q: must differ from http.addr", h.AdminAddr))
	}
	return errors.Join(errs...)
}

// newServer is an http.Server with the block's limits, so that a slow or
// idle client is cut off instead of holding a goroutine and a file
// descriptor for as long as it likes.
func (h HTTP) newServer(handler http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: h.ReadHeaderTimeout,
		ReadTimeout:       h.ReadTimeout,
		WriteTimeout:      h.WriteTimeout,
		IdleTimeout:       h.IdleTimeout,
		MaxHeaderBytes:    h.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// WriteJSON answers status with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
