package outboxui

import (
	"cmp"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/internal/optcheck"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Defaults and limits of Options.
const (
	DefaultPath            = "/"
	DefaultPageSize        = 50
	MaxPageSize            = 500
	DefaultSampleInterval  = 5 * time.Second
	MinSampleInterval      = time.Second
	DefaultSamples         = 60
	MaxSamples             = 10_000
	DefaultRefresh         = 3 * time.Second
	MinRefresh             = 500 * time.Millisecond
	DefaultMaxPayloadShown = 64 << 10
	DefaultQueryTimeout    = 10 * time.Second
	DefaultRequeueBatch    = 500
	// MinCSRFKeyBytes is the shortest CSRFKey accepted.
	MinCSRFKeyBytes = 32
)

// Options configures the dashboard. Only Outboxes is required; New
// fills in the defaults and rejects bad values with an error that names
// the field.
type Options struct {
	// Outboxes are the outboxes shown, at least one, with distinct names:
	// stores that implement backend.Outbox, such as a *mysql.Store.
	Outboxes []Outbox
	// Path is where the handler is mounted, starting and ending with "/"
	// (e.g. "/outbox/"): its links and its session cookie use it, and it
	// serves requests under it. Defaults to DefaultPath ("/").
	Path string
	// AllowedHosts are the host names and IP addresses, besides
	// loopback, that the dashboard answers to: it serves a request only
	// if its Host header (the name in the browser's address bar) is
	// localhost, an address in 127.0.0.0/8, ::1, or one of these, on any
	// port; anything else gets 421 Misdirected Request. This stops DNS
	// rebinding: a web page on a name of its own, resolved to the
	// dashboard's address, cannot read its pages or post its forms.
	// Entries carry no port and no wildcard; names are matched without
	// regard to case or a trailing dot; an IPv6 address may be written
	// with or without brackets. List every name operators open the
	// dashboard under (a Kubernetes Service's, a proxy's); a reverse
	// proxy in front must pass the Host it was asked for, or one listed
	// here. Defaults to none: loopback only, which is what a
	// port-forward (kubectl port-forward, ssh -L) or a port published on
	// the host's loopback sends. CheckHost checks one entry.
	AllowedHosts []string
	// ReadOnly switches every action off: no requeue buttons, and every
	// POST is refused with 403.
	ReadOnly bool
	// Authorize, if set, is called for every request before anything
	// else; an error refuses the request with 403 (the error is logged,
	// not shown). Nil lets every request in: mount the handler behind the
	// service's own authentication, or only on a loopback admin listener.
	Authorize func(*http.Request) error
	// CSRFKey signs the per-session tokens that actions carry. Defaults
	// to a random key per handler (sessions then end with the process,
	// and instances behind one load balancer do not share them: give them
	// one key). At least MinCSRFKeyBytes.
	CSRFKey []byte
	// PageSize is how many records a list page shows. Defaults to
	// DefaultPageSize; 1 to MaxPageSize.
	PageSize int
	// SampleInterval is how often the handler samples every queue's
	// stats for the throughput history. Defaults to
	// DefaultSampleInterval; at least MinSampleInterval.
	SampleInterval time.Duration
	// Samples is how many samples the history keeps per queue (memory is
	// bounded by it). Defaults to DefaultSamples (five minutes at the
	// default interval); at most MaxSamples.
	Samples int
	// Refresh is how often an open overview polls for fresh figures.
	// The open overviews share one read of them per Refresh/2, however
	// many there are (a requeue makes the next one read afresh).
	// Defaults to DefaultRefresh; at least MinRefresh.
	Refresh time.Duration
	// MaxPayloadShown bounds the payload bytes a record page shows; it
	// says so when it cuts. Defaults to DefaultMaxPayloadShown (64 KiB).
	MaxPayloadShown int
	// QueryTimeout bounds each store call of a request or a sample.
	// Defaults to DefaultQueryTimeout.
	QueryTimeout time.Duration
	// RequeueBatch is the batch size of a requeue of everything a filter
	// matches (backend.RequeueOptions.BatchSize). Defaults to
	// DefaultRequeueBatch.
	RequeueBatch int
	// Logger receives store errors and refused requests. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	o.Path = cmp.Or(o.Path, DefaultPath)
	o.PageSize = cmp.Or(o.PageSize, DefaultPageSize)
	o.SampleInterval = cmp.Or(o.SampleInterval, DefaultSampleInterval)
	o.Samples = cmp.Or(o.Samples, DefaultSamples)
	o.Refresh = cmp.Or(o.Refresh, DefaultRefresh)
	o.MaxPayloadShown = cmp.Or(o.MaxPayloadShown, DefaultMaxPayloadShown)
	o.QueryTimeout = cmp.Or(o.QueryTimeout, DefaultQueryTimeout)
	o.RequeueBatch = cmp.Or(o.RequeueBatch, DefaultRequeueBatch)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

// validate checks options with their defaults filled in.
func (o Options) validate() error {
	problems := optcheck.New("outboxui")
	bad := problems.Addf
	if len(o.Outboxes) == 0 {
		bad("Outboxes: at least one is required")
	}
	seen := map[string]bool{}
	for i, ob := range o.Outboxes {
		switch {
		case ob == nil:
			bad("Outboxes[%d]: is nil", i)
		case ob.Name() == "" || seen[ob.Name()]:
			bad("Outboxes[%d]: name %q: must be non-empty and unique", i, ob.Name())
		default:
			seen[ob.Name()] = true
		}
	}
	if !strings.HasPrefix(o.Path, "/") || !strings.HasSuffix(o.Path, "/") || strings.ContainsAny(o.Path, "?#\"'<> ") {
		bad("Path %q: must start and end with \"/\" and hold no query, quote or space", o.Path)
	}
	_, err := newHostSet(o.AllowedHosts)
	problems.Add(err)
	if len(o.CSRFKey) > 0 && len(o.CSRFKey) < MinCSRFKeyBytes {
		bad("CSRFKey: %d bytes: must be at least %d", len(o.CSRFKey), MinCSRFKeyBytes)
	}
	if o.PageSize < 1 || o.PageSize > MaxPageSize || o.PageSize > outbox.MaxBatchSize {
		bad("PageSize %d: must be 1 to %d", o.PageSize, min(MaxPageSize, outbox.MaxBatchSize))
	}
	if o.SampleInterval < MinSampleInterval {
		bad("SampleInterval %v: must be at least %v", o.SampleInterval, MinSampleInterval)
	}
	if o.Samples < 2 || o.Samples > MaxSamples {
		bad("Samples %d: must be 2 to %d", o.Samples, MaxSamples)
	}
	if o.Refresh < MinRefresh {
		bad("Refresh %v: must be at least %v", o.Refresh, MinRefresh)
	}
	if o.MaxPayloadShown < 1 {
		bad("MaxPayloadShown %d: must be positive", o.MaxPayloadShown)
	}
	if o.QueryTimeout <= 0 {
		bad("QueryTimeout %v: must be positive", o.QueryTimeout)
	}
	if o.RequeueBatch < 1 || o.RequeueBatch > backend.MaxRequeueBatch {
		bad("RequeueBatch %d: must be 1 to %d", o.RequeueBatch, backend.MaxRequeueBatch)
	}
	return problems.Err()
}
