package backend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Store keeps messages and their delivery state: the contract between
// the worker (outbox.Worker) and a database. store/mysql is the
// implementation for MySQL and MariaDB, outbox/outboxtest.NewStore one in
// memory; backendtest holds the conformance suites every implementation
// must pass.
//
// All methods are safe for concurrent use, also by several processes
// sharing one database: that is what leases are for. Every method honours
// ctx for cancellation of its database work.
type Store interface {
	// Enqueue stores msgs as pending, through tx, which is normally the
	// caller's transaction: the messages become visible with its commit
	// and vanish with its rollback. They are due at once, or after
	// opts.HeadStart; nil opts means the defaults. It returns an error
	// wrapping ErrInvalidMessage or ErrDuplicateID when a message is
	// rejected; in that case nothing of the call is written.
	Enqueue(ctx context.Context, tx Execer, opts *EnqueueOptions, msgs ...Message) error

	// Get returns the record with the given message ID, or an error
	// wrapping ErrNotFound.
	Get(ctx context.Context, id string) (Record, error)

	// Claim leases up to p.Limit pending records that are due (or, when
	// p.IDs is set, the named pending records whatever their due time) and
	// not leased by anyone else, for p.LeaseFor on the store's clock. The
	// claim is committed before Claim returns: no database transaction
	// stays open while the caller publishes. Records are returned in the
	// order they should be published. A record held by another claim is
	// skipped, not waited for. An empty Batch (no error) means nothing was
	// due.
	Claim(ctx context.Context, p ClaimParams) (Batch, error)

	// Settle records the outcome of claimed records. It is fenced by the
	// batch token: an outcome whose record is no longer leased under token
	// (the lease expired and another claim took it, or it was settled
	// already) is not applied and is counted in SettleResult.Stale. Settle
	// is idempotent, so it may be retried after an error.
	Settle(ctx context.Context, token string, outcomes []Outcome) (SettleResult, error)

	// Capabilities says what the store can do beyond this contract (see
	// Capabilities). A decorator that embeds a Store keeps them: the
	// method is promoted with the others.
	Capabilities() Capabilities
}

// Capabilities is what a store can do beyond Store: its fast paths and
// its tools. A nil field is something it cannot do, and the worker then
// takes the fallback its field names.
//
// A decorator (a Store that wraps another, for tracing, say) that embeds
// the Store it wraps keeps them, since Capabilities is promoted; the
// worker calls those methods on the store beneath, not through the
// decorator. A decorator that wants to see such calls too has the method
// itself (SettleAndClaim, say): CapabilitiesOf takes the decorator's own
// method over the one beneath. One that wants a fallback taken (a test's
// store that fails every claim) returns Capabilities without it.
type Capabilities struct {
	// Outbox names the outbox (store/mysql and store/postgres: its
	// table), and Consumer the named consumer a consumer's store
	// delivers for ("" for the default consumer): "" for a store that
	// does not say. They label metrics (outbox/outboxprom), and the
	// worker's Name defaults to Consumer, or else Outbox.
	Outbox, Consumer string
	// SettleAndClaim records a batch's outcomes and claims the next batch
	// in one transaction. Without it: Settle, then Claim (two commits).
	SettleAndClaim SettleClaimer
	// HeadStart leases messages to their writer for the head start, so
	// that the after-commit publish calls the sink without a claim.
	// Without it: the after-commit publish claims its messages by ID.
	HeadStart HeadStartLeaser
	// OrderedHeadStart is HeadStart for a worker with Ordering. Without
	// it, such a worker's after-commit publish claims by ID.
	OrderedHeadStart OrderedHeadStartLeaser
	// EndHeadStart ends the head start of what the after-commit publish
	// leaves to the workers. Without it, those messages are due when
	// their head start ends.
	EndHeadStart HeadStartEnder
	// Purge deletes published records (retention). Without it, a
	// worker with Retention is refused at construction.
	Purge Purger
	// Transactions begins transactions on the store's own database and
	// takes a caller's transaction of a kind other than an Execer
	// (pgx.Tx, on PostgreSQL). Without it, outbox.Writer's Do cannot
	// begin a transaction, and its Enqueue and Commit take an Execer
	// only.
	Transactions Transactor
}

// CapabilitiesOf returns what s can do: s.Capabilities(), with each
// method that s itself has (a decorator's own SettleAndClaim, say) in
// place of the one beneath it. A test's fake that embeds a nil Store
// (and whose Capabilities so panics) can do nothing more.
func CapabilitiesOf(s Store) Capabilities {
	c := capabilities(s)
	own(s, &c.SettleAndClaim)
	own(s, &c.HeadStart)
	own(s, &c.OrderedHeadStart)
	own(s, &c.EndHeadStart)
	own(s, &c.Purge)
	own(s, &c.Transactions)
	return c
}

// own sets *method to s when s itself has the method's interface M.
func own[M any](s Store, method *M) {
	if x, ok := s.(M); ok {
		*method = x
	}
}

// capabilities is s.Capabilities(), or none when it panics.
func capabilities(s Store) (c Capabilities) {
	defer func() {
		if recover() != nil {
			c = Capabilities{}
		}
	}()
	return s.Capabilities()
}

// Discover returns the Capabilities of a store s by the methods it has
// (Outbox and Consumer left for the store to fill in): what a store's
// Capabilities method starts from.
func Discover(s Store) Capabilities {
	var c Capabilities
	c.SettleAndClaim, _ = s.(SettleClaimer)
	c.HeadStart, _ = s.(HeadStartLeaser)
	c.OrderedHeadStart, _ = s.(OrderedHeadStartLeaser)
	c.EndHeadStart, _ = s.(HeadStartEnder)
	c.Purge, _ = s.(Purger)
	c.Transactions, _ = s.(Transactor)
	return c
}

// Transactor is a store's side of the writer's transactions
// (outbox.Writer).
type Transactor interface {
	// BeginTx begins a transaction on the database the store keeps its
	// messages in, so that a writer cannot be handed another.
	BeginTx(ctx context.Context) (*sql.Tx, error)
	// ExecerOf returns what Enqueue writes through for tx, a transaction
	// of the caller's that is not an Execer (store/postgres: a pgx.Tx),
	// and whether the store takes it.
	ExecerOf(tx any) (Execer, bool)
}

// Execer is the part of a database handle Store.Enqueue needs. *sql.Tx,
// *sql.DB and *sql.Conn satisfy it; pass the *sql.Tx of the transaction that
// changes the state the messages announce.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

var (
	_ Execer = (*sql.Tx)(nil)
	_ Execer = (*sql.DB)(nil)
	_ Execer = (*sql.Conn)(nil)
)

// EnqueueOptions adjusts Store.Enqueue. The zero value (or nil) means
// the defaults.
type EnqueueOptions struct {
	// HeadStart keeps the messages from being due for workers until this
	// long after they are written (by the store's clock). Use it for
	// messages the writer publishes itself right after commit with
	// Worker.PublishNow, so that a running worker does not race that fast
	// path: in the normal case the message is then delivered once, by the
	// writer. If the writer fails or crashes, a worker delivers the message
	// once the head start has passed. DefaultHeadStart is a good value.
	// Zero means due at once; negative values are an error.
	HeadStart time.Duration
}

// DefaultHeadStart is a head start (EnqueueOptions.HeadStart) that covers
// the after-commit publish at outbox.Worker's default timeouts
// (PublishTimeout 3 s plus StoreTimeout 5 s), with 2 s to spare for the
// writer's commit. A store that leases messages to their writer
// (HeadStartLeaser, as store/mysql does) then lets Worker.PublishNow
// publish after one read, with no claim and so no commit of its own
// before the sink call. The price is paid when the writer dies between
// its commit and its publish: a worker delivers the message once the
// head start has passed, 10 s after the commit. A shorter head start
// works too, with a claim before each after-commit publish; a worker
// with longer timeouts needs a longer one for the fast path.
const DefaultHeadStart = 10 * time.Second

// ClaimParams says what to claim.
type ClaimParams struct {
	// Owner names the claimer for operators (Worker uses its NodeID, and
	// logs it). Required; at most MaxOwnerLength characters. A store need
	// not write it on each record: store/mysql does not (from schema
	// version 5), so that a claim rewrites only fixed-width columns.
	Owner string
	// Limit is the most records to claim; 1 to MaxClaimLimit.
	Limit int
	// LeaseFor is how long the lease lasts on the store's clock. Records
	// not settled by then become due again and may be claimed by others.
	// Must be positive.
	LeaseFor time.Duration
	// IDs, when not empty, restricts the claim to these message IDs and
	// ignores due times: the after-commit path claims exactly what it has
	// just written. Records that are not pending, or are leased by someone
	// else, are left out. Limit must be at least len(IDs).
	IDs []string
	// Ordered claims, of each non-empty key, only the oldest pending
	// record (its head), and only while no other record of the key is
	// leased: at most one record per key is in flight, in enqueue order.
	// With IDs, a key's records are claimed only if they are that key's
	// oldest pending records, in order; otherwise none of them are.
	// Records with an empty key are unordered.
	Ordered bool
}

// Validate reports each field of p that no store accepts, naming the
// field and the value, as one joined error: Owner, 1 to MaxOwnerLength
// characters; Limit, 1 to MaxClaimLimit; LeaseFor, at least 1µs (a
// store's clock counts microseconds); and no more IDs than Limit. what
// prefixes each ("mysql store" gives "mysql store: claim: Limit 0: must
// be 1 to 10000").
func (p ClaimParams) Validate(what string) error {
	var errs []error
	if p.Owner == "" || utf8.RuneCountInString(p.Owner) > MaxOwnerLength {
		errs = append(errs, fmt.Errorf("%s: claim: Owner %q: must be 1 to %d characters", what, p.Owner, MaxOwnerLength))
	}
	if p.Limit < 1 || p.Limit > MaxClaimLimit {
		errs = append(errs, fmt.Errorf("%s: claim: Limit %d: must be 1 to %d", what, p.Limit, MaxClaimLimit))
	}
	if p.LeaseFor < time.Microsecond {
		errs = append(errs, fmt.Errorf("%s: claim: LeaseFor %v: must be at least 1µs", what, p.LeaseFor))
	}
	if len(p.IDs) > p.Limit {
		errs = append(errs, fmt.Errorf("%s: claim: %d IDs: more than Limit %d", what, len(p.IDs), p.Limit))
	}
	return errors.Join(errs...)
}

// Bounds of ClaimParams.
const (
	// MaxClaimLimit is the largest Limit, so that a claim never amounts
	// to a table scan.
	MaxClaimLimit = 10_000
	// MaxOwnerLength is the longest Owner, in characters.
	MaxOwnerLength = 255
)

// SettleClaimer is a Store that can record one batch's outcomes and claim
// the next batch in one transaction: one commit per batch while there is
// a backlog instead of two. The worker uses it when the store's Capabilities have it.
type SettleClaimer interface {
	// SettleAndClaim records s as Settle would, then claims as Claim
	// would, in one transaction; settling first, so that in ordered mode
	// the keys those outcomes free are claimable at once. If it fails,
	// neither may have happened: settle the outcomes alone.
	SettleAndClaim(ctx context.Context, s Settlement, p ClaimParams) (SettleResult, Batch, error)
}

// HeadStartLeaser is a Store whose Enqueue, given a HeadStart, also
// leases the messages to the writing process for the head start, in the
// writer's own transaction, so that the writer's after-commit publish
// (Worker.PublishNow) needs no claim, and so no commit, before it calls
// the sink. Worker.PublishNow uses it when the Capabilities have it and ordering
// is off; the head start is then the publish's lease.
type HeadStartLeaser interface {
	// HeadStartBatch returns, without writing anything, those of ids that
	// this process enqueued with a head start and that are still pending
	// under it with at least minLeft of it to run, in insert order, and
	// the token to settle them with. Other records (enqueued without a
	// head start, by another process, or claimed since) are left out.
	// left is the least head start any of the returned records has left,
	// on the store's clock when it read them (at least minLeft; zero when
	// none is returned): the caller's lease, counted from before the call.
	HeadStartBatch(ctx context.Context, ids []string, minLeft time.Duration) (b Batch, left time.Duration, err error)
}

// OrderedHeadStartLeaser is a HeadStartLeaser that keeps per-key order
// too, so that a Worker with Ordering publishes after commit under the
// head start, as one without does, instead of claiming the messages.
type OrderedHeadStartLeaser interface {
	HeadStartLeaser
	// OrderedHeadStartBatch is HeadStartBatch that also leaves out every
	// message of a key while an older message of that key that is not
	// among ids is still to be delivered (pending, leased, or held by its
	// own writer). Messages of a key among ids do not hold each other
	// back: the caller publishes them in order.
	OrderedHeadStartBatch(ctx context.Context, ids []string, minLeft time.Duration) (b Batch, left time.Duration, err error)
}

// HeadStartEnder is a Store that can end the head start
// (EnqueueOptions.HeadStart) of messages early. Worker.PublishNow uses it
// for the messages it leaves to the workers, so that they are due at once
// rather than when the head start would have ended.
type HeadStartEnder interface {
	// EndHeadStart makes those of ids that are pending, not yet due
	// because of the head start they were enqueued with (by this
	// process, for a store that tells processes apart), and not claimed,
	// due at once, and returns how many it changed. It waits for claims
	// in progress that hold the records (briefly: a claim commits before
	// any sink call).
	EndHeadStart(ctx context.Context, ids []string) (int, error)
}

// Settlement is outcomes to record under the batch token that fences them.
type Settlement struct {
	Token    string
	Outcomes []Outcome
}

// Batch is the result of a claim.
type Batch struct {
	// Token fences the lease: pass it to Store.Settle.
	Token string
	// Records are the claimed records, in publishing order.
	Records []Record
	// Invalid are claimed records the store could not decode (say, stored
	// headers that are not valid JSON). They are leased like the others and
	// must be settled too: the worker records them as failed attempts.
	Invalid []InvalidRecord
	// More says the claim left due records that it could have taken but
	// for its Limit or its store's byte budget, or, ordered, because their
	// key's head is in this batch (they are due once it is settled). The
	// worker then claims again as soon as it has settled the batch,
	// rather than after PollInterval. False means the claim took all it
	// could find, or the store cannot tell.
	More bool
	// RetryAfter, when positive, says the claim left work it could not
	// take yet but will soon (store/postgres: committed messages behind
	// a transaction that was still running when it looked): the worker
	// claims again after RetryAfter if that is sooner than PollInterval.
	RetryAfter time.Duration
}

// Len returns the number of records claimed, valid or not.
func (b Batch) Len() int { return len(b.Records) + len(b.Invalid) }

// InvalidRecord is a claimed record that could not be decoded. Record holds
// the fields that could be read (at least ID and Attempts).
type InvalidRecord struct {
	Record
	// Err says what could not be decoded.
	Err error
}

// OutcomeKind says what happened to a claimed record.
type OutcomeKind int

// The outcomes of a claimed record.
const (
	// OutcomePublished: the sink accepted the message. Status becomes
	// published and LastError is cleared.
	OutcomePublished OutcomeKind = iota + 1
	// OutcomeRetry: a failed attempt. Attempts grows by one, LastError is
	// set, and the record is due again RetryIn from now.
	OutcomeRetry
	// OutcomeDead: a failed attempt that will not be retried. Attempts
	// grows by one, LastError is set, and Status becomes dead.
	OutcomeDead
	// OutcomeRelease: not attempted (the worker was stopping, or the
	// after-commit publish failed). The lease is dropped, Attempts and
	// LastError stay as they are, and the record is due at once.
	OutcomeRelease
)

// String returns the outcome's name as used in logs.
func (k OutcomeKind) String() string {
	switch k {
	case OutcomePublished:
		return "published"
	case OutcomeRetry:
		return "retry"
	case OutcomeDead:
		return "dead"
	case OutcomeRelease:
		return "release"
	}
	return "unknown"
}

// Outcome is what happened to one claimed record.
type Outcome struct {
	// ID is the message ID.
	ID string
	// Seq, when not zero, is the claimed record's Record.Seq: a store may
	// find the record by it rather than by ID (store/mysql settles by its
	// primary key then). It must be the Seq the claim returned for ID.
	Seq int64
	// Kind is what happened.
	Kind OutcomeKind
	// RetryIn is the delay before the next attempt (OutcomeRetry only).
	RetryIn time.Duration
	// Error is the failure text for OutcomeRetry and OutcomeDead; stores
	// cut it to MaxLastErrorBytes.
	Error string
}

// SettleResult reports what Settle applied.
type SettleResult struct {
	// Applied counts outcomes written.
	Applied int
	// Stale counts outcomes not written because their record was no longer
	// leased under the token.
	Stale int
	// Dead lists, sorted, the IDs of the OutcomeDead outcomes that were
	// written: exactly the dead letters the store recorded.
	Dead []string
}
