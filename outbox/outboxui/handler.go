package outboxui

import (
	"context"
	"crypto/rand"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"sync"
)

//go:embed assets templates
var files embed.FS

// Handler is the dashboard: an http.Handler to mount at Options.Path.
// It is safe for concurrent use. Close stops its sampler.
type Handler struct {
	opts    Options
	mux     *http.ServeMux
	pages   map[string]*template.Template
	hist    *history
	hosts   hostSet
	csrfKey []byte
	// The sampler starts with the first request (startOnce) and stops
	// with Close, which also keeps it from starting afterwards.
	startOnce sync.Once
	closeOnce sync.Once
	sampler   *sampler
	// shared is the overview's last read, shared by the requests that
	// poll it (see readAllShared).
	shared sharedRead
}

// New returns the dashboard for opts. It fails, naming the field, if an
// option is invalid. It does not touch the stores and starts nothing: the
// sampler of the throughput starts with the first request and runs until
// Close.
func New(opts Options) (*Handler, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	h := &Handler{opts: opts, hist: newHistory(opts.Samples), csrfKey: opts.CSRFKey}
	h.hosts, _ = newHostSet(opts.AllowedHosts) // validate checked it
	if len(h.csrfKey) == 0 {
		h.csrfKey = make([]byte, MinCSRFKeyBytes)
		if _, err := rand.Read(h.csrfKey); err != nil {
			return nil, fmt.Errorf("outboxui: CSRF key: %w", err)
		}
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	h.pages = pages
	h.routes()
	return h, nil
}

// Close stops the throughput sampler, if it started, and waits for it to
// return. The handler still serves pages afterwards, with the history it
// has, and never starts the sampler again. Close is safe to call more
// than once, and concurrently with requests.
func (h *Handler) Close() error {
	h.closeOnce.Do(func() {
		h.startOnce.Do(func() {}) // no start after Close
		if h.sampler != nil {
			h.sampler.stop()
		}
	})
	return nil
}

// routes registers the pages under Options.Path.
func (h *Handler) routes() {
	p := h.opts.Path
	assets, _ := fs.Sub(files, "assets") // cannot fail: the directory is embedded
	h.mux = http.NewServeMux()
	h.mux.HandleFunc("GET "+p+"{$}", h.overview)
	h.mux.HandleFunc("GET "+p+"api/overview", h.overviewJSON)
	h.mux.HandleFunc("GET "+p+"records", h.records)
	h.mux.HandleFunc("GET "+p+"record", h.record)
	h.mux.HandleFunc("POST "+p+"requeue", h.requeue)
	h.mux.Handle("GET "+p+"assets/", http.StripPrefix(p+"assets/", http.FileServerFS(assets)))
}

// contentSecurityPolicy allows nothing but the handler's own script,
// styles, images and fetches; forms post only to it, and no page may
// frame it.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP sets the security headers, refuses a Host it does not serve
// (Options.AllowedHosts), asks Options.Authorize, and serves the page.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin") // not no-referrer: with it, browsers send "Origin: null" on a form POST
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	if !h.hosts.allows(r.Host) {
		h.misdirected(w, r)
		return
	}
	h.startOnce.Do(func() { h.sampler = h.startSampler() })
	if h.opts.Authorize != nil {
		if err := h.opts.Authorize(r); err != nil {
			h.opts.Logger.WarnContext(r.Context(), "outboxui: request refused by Authorize", "method", r.Method, "path", r.URL.Path, "error", err)
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// withTimeout bounds a store call by Options.QueryTimeout.
func (h *Handler) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, h.opts.QueryTimeout)
}
