package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/internal/optcheck"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Defaults and limits of WorkerOptions.
const (
	DefaultName           = "outbox"
	DefaultPollInterval   = time.Second
	DefaultBatchSize      = 100
	DefaultPublishTimeout = 3 * time.Second
	// DefaultAfterCommitTimeout bounds the sink call of PublishNow, which
	// a request waits for.
	DefaultAfterCommitTimeout = 500 * time.Millisecond
	DefaultStoreTimeout       = 5 * time.Second
	// DefaultLeaseTimeout is the lease when it is not set, unless twice
	// the minimum lease (see WorkerOptions.LeaseTimeout) is longer.
	DefaultLeaseTimeout = 30 * time.Second
	DefaultKeyAttr      = "key"
	// DefaultRetentionInterval and DefaultRetentionBatch pace retention.
	DefaultRetentionInterval = time.Minute
	DefaultRetentionBatch    = 1000

	// MinPollInterval is the shortest PollInterval accepted: anything
	// shorter would be a busy loop against the database.
	MinPollInterval = 10 * time.Millisecond
	// MaxBatchSize is the largest BatchSize accepted, so that a round
	// never amounts to a table scan: a store's largest claim.
	MaxBatchSize = backend.MaxClaimLimit
	// MaxNodeIDLength is the longest NodeID, in characters: the longest
	// lease owner a store keeps.
	MaxNodeIDLength = backend.MaxOwnerLength
	// MaxConcurrency bounds Concurrency.
	MaxConcurrency = 1024
)

// WorkerOptions configures a Worker. The zero value means all defaults;
// NewWorker fills them in (see WithDefaults) and rejects values that make
// no sense with an error that names the field.
type WorkerOptions struct {
	// Name identifies the worker in logs (field "worker") and events,
	// for example "orders_outbox". Defaults to the store's name, when it
	// has one (backend.Outbox.Name: store/mysql's table), else
	// DefaultName.
	Name string
	// NodeID identifies this instance in logs (field "node_id") and as the
	// owner of its leases. Defaults to "<hostname>-<pid>". At most
	// MaxNodeIDLength characters.
	NodeID string
	// PollInterval is the wait between rounds when there was nothing more
	// to do. Values <= 0 mean DefaultPollInterval (1s); positive values
	// below MinPollInterval are an error.
	PollInterval time.Duration
	// BatchSize is the most records claimed per round. Values <= 0 mean
	// DefaultBatchSize (100); values above MaxBatchSize are an error.
	BatchSize int
	// PublishTimeout bounds each Sink.Publish call, which gets its own
	// context.WithTimeout. Values <= 0 mean DefaultPublishTimeout (3s).
	PublishTimeout time.Duration
	// AfterCommitTimeout bounds each sink call of PublishNow, the
	// after-commit publish a request waits for, which is best effort: a
	// message it could not publish in that time is left to the workers,
	// which give it PublishTimeout. Values <= 0 mean
	// DefaultAfterCommitTimeout (500ms); values above PublishTimeout are
	// cut to it.
	AfterCommitTimeout time.Duration
	// StoreTimeout bounds each store call (claim, settle). Values <= 0
	// mean DefaultStoreTimeout (5s).
	StoreTimeout time.Duration
	// LeaseTimeout is how long claimed records stay reserved for this
	// worker. If the worker dies, other workers deliver its records once
	// the lease has expired. The worker never starts a publish it could
	// not settle within the lease: records it has no time left for are
	// released. The minimum is PublishTimeout+2×StoreTimeout (claim,
	// publish, settle); shorter values are an error. Values <= 0 mean
	// DefaultLeaseTimeout (30s) or twice the minimum, whichever is longer.
	LeaseTimeout time.Duration
	// Retry decides when failed messages are tried again. Defaults to
	// FixedInterval{Interval: PollInterval}: retry forever; a
	// FixedInterval with a zero Interval also gets PollInterval.
	Retry RetryPolicy
	// DeadLetterUnavailable makes an error the sink marked Unavailable
	// (no stream for the subject, refused credentials: the
	// infrastructure's fault, not the message's) dead-letter its message
	// as a Permanent one does. Defaults to false: such a message is
	// retried whatever the policy, while the worker holds off the sink
	// and alerts, so that a destination missing for an hour does not
	// dead-letter an hour of events.
	DeadLetterUnavailable bool
	// Breaker says when the worker holds off a sink that keeps failing:
	// then nothing calls the sink but one probe at a time, at doubling
	// waits (PublishNow leaves its messages to the workers at once, and
	// Run claims one message per probe), until one goes through. The
	// zero value means the defaults (see SinkBreaker).
	Breaker SinkBreaker
	// Logger receives the worker's structured logs. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// KeyAttr is the log field that carries Message.Key. Defaults to
	// DefaultKeyAttr ("key"); a service whose keys are, say, order IDs
	// may name it "order_id".
	KeyAttr string
	// Ordering delivers the messages of one Key in enqueue order, at most
	// one in flight per key across all workers and instances, while
	// different keys go on in parallel. A failing message holds back only
	// the later messages of its key; a dead one no longer does. Messages
	// with an empty Key stay unordered. What "enqueue order" rests on is
	// in docs/ordering.md. Defaults to false: no order, more throughput.
	Ordering bool
	// OnDead, if set, is called once for each message that goes to
	// StatusDead, after that is recorded, with the record and the error
	// that ended it. It runs on the worker's goroutine, so it should be
	// quick (alert, count, enqueue a ticket); a panic in it is logged.
	OnDead func(ctx context.Context, rec Record, err error)
	// Observer receives the worker's events, for metrics. Defaults to
	// none.
	Observer Observer
	// Retention, when positive, has Run delete published records older
	// than this (by their publish time) in the background, in batches of
	// RetentionBatch every RetentionInterval. Pending and dead records are
	// never deleted. The store's Capabilities must have Purge. Defaults to 0: keep
	// everything.
	Retention time.Duration
	// RetentionInterval is the wait between retention passes. Defaults to
	// DefaultRetentionInterval (1m).
	RetentionInterval time.Duration
	// RetentionBatch is how many records one DELETE removes. Defaults to
	// DefaultRetentionBatch (1000); at most MaxBatchSize.
	RetentionBatch int
	// Concurrency is how many sink calls one worker makes at once. The
	// records of one key are still published one at a time, in order.
	// Raise it for a slow sink (a 20ms API at 8 calls in flight serves
	// 400 calls/s). Defaults to 1; at most MaxConcurrency.
	Concurrency int
}

// WithDefaults returns a copy of o with every unset or <= 0 field replaced
// by its default. It does not validate.
func (o WorkerOptions) WithDefaults() WorkerOptions {
	o.Name = cmp.Or(o.Name, DefaultName)
	if o.NodeID == "" {
		o.NodeID = defaultNodeID()
	}
	o.PollInterval = optcheck.Positive(o.PollInterval, DefaultPollInterval)
	o.BatchSize = optcheck.Positive(o.BatchSize, DefaultBatchSize)
	o.PublishTimeout = optcheck.Positive(o.PublishTimeout, DefaultPublishTimeout)
	o.AfterCommitTimeout = min(optcheck.Positive(o.AfterCommitTimeout, DefaultAfterCommitTimeout), o.PublishTimeout)
	o.StoreTimeout = optcheck.Positive(o.StoreTimeout, DefaultStoreTimeout)
	o.LeaseTimeout = optcheck.Positive(o.LeaseTimeout, max(DefaultLeaseTimeout, 2*o.minLease()))
	o.Retry = withPollInterval(o.Retry, o.PollInterval)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	o.KeyAttr = cmp.Or(o.KeyAttr, DefaultKeyAttr)
	o.RetentionInterval = optcheck.Positive(o.RetentionInterval, DefaultRetentionInterval)
	o.RetentionBatch = optcheck.Positive(o.RetentionBatch, DefaultRetentionBatch)
	o.Concurrency = optcheck.Positive(o.Concurrency, 1)
	o.Breaker = o.Breaker.withDefaults(o.PollInterval)
	return o
}

// Validate reports what NewWorker would reject in o (after filling in its
// defaults), with errors that name the field and the value. Use it to
// check configuration before building a worker; NewWorker runs the same
// check.
func (o WorkerOptions) Validate() error {
	return o.WithDefaults().validate()
}

// validate checks options that WithDefaults has filled in.
func (o WorkerOptions) validate() error {
	var errs []error
	bad := func(field string, value any, rule string) {
		errs = append(errs, fmt.Errorf("outbox: %s %v: %s", field, value, rule))
	}
	if !utf8.ValidString(o.NodeID) || utf8.RuneCountInString(o.NodeID) > MaxNodeIDLength {
		bad("NodeID", strconv.Quote(o.NodeID), fmt.Sprintf("must be valid UTF-8 of at most %d characters", MaxNodeIDLength))
	}
	if o.PollInterval < MinPollInterval {
		bad("PollInterval", o.PollInterval, fmt.Sprintf("must be at least %v (or <= 0 for the default)", MinPollInterval))
	}
	if o.BatchSize > MaxBatchSize {
		bad("BatchSize", o.BatchSize, fmt.Sprintf("must be at most %d", MaxBatchSize))
	}
	if o.LeaseTimeout < o.minLease() {
		bad("LeaseTimeout", o.LeaseTimeout, fmt.Sprintf("must be at least PublishTimeout+2×StoreTimeout (%v)", o.minLease()))
	}
	if o.Retention < 0 {
		bad("Retention", o.Retention, "must not be negative (0 keeps everything)")
	}
	if o.Concurrency > MaxConcurrency {
		bad("Concurrency", o.Concurrency, fmt.Sprintf("must be at most %d", MaxConcurrency))
	}
	if o.RetentionBatch > MaxBatchSize {
		bad("RetentionBatch", o.RetentionBatch, fmt.Sprintf("must be at most %d", MaxBatchSize))
	}
	if err := validatePolicy(o.Retry); err != nil {
		errs = append(errs, fmt.Errorf("outbox: Retry: %w", err))
	}
	if o.Breaker.MaxProbeInterval < o.PollInterval {
		bad("Breaker.MaxProbeInterval", o.Breaker.MaxProbeInterval, fmt.Sprintf("must be at least PollInterval (%v)", o.PollInterval))
	}
	return errors.Join(errs...)
}

// withPollInterval gives a FixedInterval without an interval (also one
// wrapped in MaxAttempts) the poll interval, and nil the default policy.
func withPollInterval(p RetryPolicy, poll time.Duration) RetryPolicy {
	switch p := p.(type) {
	case nil:
		return FixedInterval{Interval: poll}
	case FixedInterval:
		if p.Interval == 0 {
			return FixedInterval{Interval: poll}
		}
	case *FixedInterval:
		if p != nil && p.Interval == 0 {
			return FixedInterval{Interval: poll}
		}
	case MaxAttempts:
		if p.Policy != nil {
			p.Policy = withPollInterval(p.Policy, poll)
		}
		return p
	}
	return p
}

// validatePolicy checks the policies this package knows; others are the
// caller's business.
func validatePolicy(p RetryPolicy) error {
	switch p := p.(type) {
	case FixedInterval:
		if p.Interval < 0 {
			return fmt.Errorf("FixedInterval{%v}: interval must not be negative", p.Interval)
		}
	case *FixedInterval:
		if p == nil {
			return errors.New("(*FixedInterval)(nil): must not be a nil pointer")
		}
		return validatePolicy(*p)
	case Exponential:
		if err := p.validate(); err != nil {
			return fmt.Errorf("Exponential: %w", err)
		}
	case MaxAttempts:
		if p.Attempts < 1 {
			return fmt.Errorf("MaxAttempts{%d}: must allow at least 1 attempt", p.Attempts)
		}
		if p.Policy == nil {
			return errors.New("MaxAttempts: Policy is nil")
		}
		return validatePolicy(p.Policy)
	}
	return nil
}

// minLease is the shortest lease that covers a claim, one publish and the
// settle after it.
func (o WorkerOptions) minLease() time.Duration {
	return o.PublishTimeout + 2*o.StoreTimeout
}

func defaultNodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}
