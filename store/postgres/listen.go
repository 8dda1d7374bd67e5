package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outboxrelay/outboxrelay/internal/pgdsn"
)

// ListenerOptions configures a Listener. The zero value means all
// defaults.
type ListenerOptions struct {
	// Table is the outbox table whose channel to listen on (Enqueue
	// notifies the channel named like the table; see Store.Channel).
	// Defaults to DefaultTable. Store.Listener takes it from the Store:
	// leave it empty there.
	Table string
	// Logger receives a warning for every lost connection and failed
	// reconnect. Defaults to slog.Default().
	Logger *slog.Logger
	// MinRetry and MaxRetry bound the pause before a reconnect, which
	// doubles from MinRetry up to MaxRetry while reconnects fail.
	// Defaults 100ms and 5s.
	MinRetry, MaxRetry time.Duration
}

// Listener wakes workers when messages are committed: it LISTENs on the
// outbox's channel, on a connection of its own, and calls a callback
// (normally outbox.Worker.Notify) for every notification. Enqueue
// notifies the channel in the writer's transaction, so PostgreSQL
// delivers the notification at commit, and not at all on rollback.
//
// The Listener never replaces the worker's polling: a notification can
// be lost (the connection drops, a worker is on another database
// replica), and the poll stays the fallback. After every (re)connect the
// callback is called once, for what was committed while the Listener
// was not listening.
type Listener struct {
	connect func(ctx context.Context) (*pgx.Conn, error)
	channel string
	log     *slog.Logger
	minWait time.Duration
	maxWait time.Duration
}

// NewListener returns a Listener that connects with dsn (a pgx
// connection string or URL). A DSN that does not parse unambiguously is
// refused (see CheckDSN; the error matches ErrAmbiguousDSN). Its errors,
// and the lines it logs, never hold a piece of the DSN's password.
func NewListener(dsn string, opts ListenerOptions) (*Listener, error) {
	if err := pgdsn.Check(dsn); err != nil {
		return nil, fmt.Errorf("postgres listener: the DSN %w", err)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgconn's parse errors hold the connection string with the
		// password masked as well as pgx can tell it; say only that it
		// did not parse.
		return nil, errors.New("postgres listener: the DSN does not parse (not shown: it may hold a password)")
	}
	return NewListenerConfig(cfg, opts)
}

// NewListenerConfig returns a Listener that connects with cfg (from
// pgx.ParseConfig, or pgxpool.Config.ConnConfig of the service's pool).
// A cfg parsed from a DSN that does not parse unambiguously is refused,
// as NewListener refuses the DSN.
func NewListenerConfig(cfg *pgx.ConnConfig, opts ListenerOptions) (*Listener, error) {
	if cfg == nil {
		return nil, errors.New("postgres listener: config is nil")
	}
	if err := pgdsn.Check(cfg.ConnString()); err != nil {
		return nil, fmt.Errorf("postgres listener: the DSN of the config %w", err)
	}
	cfg = cfg.Copy()
	return newListener(func(ctx context.Context) (*pgx.Conn, error) {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		return conn, safeDriverErr(err)
	}, opts)
}

func newListener(connect func(ctx context.Context) (*pgx.Conn, error), opts ListenerOptions) (*Listener, error) {
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if _, err := (Options{Table: opts.Table}).checked(); err != nil {
		return nil, fmt.Errorf("postgres listener: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MinRetry <= 0 {
		opts.MinRetry = 100 * time.Millisecond
	}
	if opts.MaxRetry < opts.MinRetry {
		opts.MaxRetry = max(5*time.Second, opts.MinRetry)
	}
	return &Listener{connect: connect, channel: opts.Table, log: opts.Logger, minWait: opts.MinRetry, maxWait: opts.MaxRetry}, nil
}

// Run listens until ctx is done, calling notify for every notification
// (and once after every connect), and reconnecting after a lost
// connection. It returns nil when ctx is done; it has then closed its
// connection and started no goroutine that outlives it. notify must not
// block for long: outbox.Worker.Notify never does.
func (l *Listener) Run(ctx context.Context, notify func()) error {
	if notify == nil {
		return errors.New("postgres listener: notify is nil")
	}
	wait := l.minWait
	for {
		listened, err := l.listenOnce(ctx, notify)
		if ctx.Err() != nil {
			return nil
		}
		if listened {
			wait = l.minWait
		}
		l.log.Warn("outbox listener lost its connection; reconnecting", "channel", l.channel, "retry_in", wait, "error", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		wait = min(2*wait, l.maxWait)
	}
}

// listenOnce connects, listens and calls notify until the connection
// fails or ctx is done. listened reports that LISTEN took effect.
func (l *Listener) listenOnce(ctx context.Context, notify func()) (listened bool, err error) {
	conn, err := l.connect(ctx)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+quote(l.channel)); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	notify() // what was committed while no one listened
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, err
		}
		notify()
	}
}

// Listener returns a Listener on the Store's channel (its table), that
// connects as the Store's connections do: with the configuration of a
// connection of the Store's pool, read at each connect. Its connection
// is its own, outside the pool. opts.Table must be empty or the Store's
// table: the name is the Store's, and a second one could only disagree.
func (s *Store) Listener(opts ListenerOptions) (*Listener, error) {
	if opts.Table != "" && opts.Table != s.opts.Table {
		return nil, fmt.Errorf("postgres listener: Table %q: the store's table is %q (leave Table empty: the store names it)", opts.Table, s.opts.Table)
	}
	opts.Table = s.opts.Table
	return newListener(func(ctx context.Context) (*pgx.Conn, error) {
		cfg, err := s.connConfig(ctx)
		if err != nil {
			return nil, err
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		return conn, safeDriverErr(err)
	}, opts)
}

// connConfig returns the configuration a connection of the Store's pool
// was opened with (pgx's stdlib driver keeps it).
func (s *Store) connConfig(ctx context.Context) (*pgx.ConnConfig, error) {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, safeDriverErr(err)
	}
	defer c.Close()
	var cfg *pgx.ConnConfig
	err = c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("the store's database is not on pgx's stdlib driver (its connection is a %T)", dc)
		}
		cfg = sc.Conn().Config()
		return nil
	})
	return cfg, err
}
