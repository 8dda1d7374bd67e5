package svckit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// State is where a service is in its life.
type State int32

// The states of a Shell, in order.
const (
	StateStarting State = iota
	StateServing
	StateDraining
	StateStopped
)

func (s State) String() string {
	return [...]string{"starting", "serving", "draining", "stopped"}[s]
}

// The first shutdown steps, in order, as Shell.Lifecycle reports them and
// the log says them ("lifecycle: …"). ShellOptions names the last two.
const (
	StepDraining    = "draining: /readyz answers 503"
	StepDrainDelay  = "drain delay over"
	StepHTTPStopped = "http server stopped"
)

// ShellOptions configures a Shell.
type ShellOptions struct {
	// Name is the service's, in the log line "<name> serving".
	Name   string
	Logger *slog.Logger
	// HTTP is the service's http block, with its defaults.
	HTTP HTTP
	// ShutdownTimeout bounds a graceful stop after the drain delay (Run).
	ShutdownTimeout time.Duration
	// WorkStopped names the step at which the background work (Go) has
	// stopped, e.g. "outbox worker stopped".
	WorkStopped string
	// Closed names the last step, e.g. "mysql closed".
	Closed string
	// Close releases what the background work used (NATS, MySQL), last.
	Close func() error
}

// Shell is what the example services share in how they run: the public
// and the admin HTTP listeners, the background work (outbox workers,
// consumers, retention), the probes, and the drain order on SIGTERM.
// A service builds its parts, hands the Shell its two handlers (Serve),
// its background work (Go) and what to close (ShellOptions.Close), and
// keeps only what is its own.
type Shell struct {
	opts          ShellOptions
	public, admin *http.Server
	// tasks run from Start until step 4 of Shutdown; onHTTPStopped run
	// once the servers have stopped (a dashboard's sampler).
	tasks         []func(context.Context)
	onHTTPStopped []func() error
	// attrs are added to the "serving" log line.
	attrs     []slog.Attr
	listeners [2]net.Listener
	state     atomic.Int32
	cancel    context.CancelFunc
	running   sync.WaitGroup
	serveDone chan error
	stopOnce  sync.Once
	stopErr   error
	mu        sync.Mutex
	steps     []string
}

// NewShell returns a Shell that is starting: nothing listens yet.
func NewShell(opts ShellOptions) *Shell {
	return &Shell{opts: opts, serveDone: make(chan error, 2)}
}

// Build opens the service's database (m, waiting for the server) and
// builds the service on it; when build fails, it closes what was opened
// (ShellOptions.Close, which must handle a service built part way) and
// returns build's error.
func (s *Shell) Build(ctx context.Context, m MySQL, build func(context.Context, *sql.DB) error) error {
	db, err := m.Open(ctx)
	if err != nil {
		return err
	}
	if err := build(ctx, db); err != nil {
		_ = s.opts.Close()
		return err
	}
	return nil
}

// Serve sets the handlers of the public and the admin listener, served by
// http.Servers with the http block's limits from Start on. attrs are
// added to the log line that says the service is serving.
func (s *Shell) Serve(public, admin http.Handler, attrs ...slog.Attr) {
	s.attrs = attrs
	s.public = s.opts.HTTP.newServer(public, s.opts.Logger)
	s.admin = s.opts.HTTP.newServer(admin, s.opts.Logger)
}

// Go adds background work: Start runs task in a goroutine of its own,
// with a context that Shutdown cancels once HTTP has drained; Shutdown
// waits for it to return before it closes anything.
func (s *Shell) Go(task func(ctx context.Context)) { s.tasks = append(s.tasks, task) }

// OnHTTPStopped adds f to what Shutdown calls once the HTTP servers have
// stopped, before the background work stops.
func (s *Shell) OnHTTPStopped(f func() error) { s.onHTTPStopped = append(s.onHTTPStopped, f) }

// Start listens on the public and the admin address (the public one
// capped at http.max_connections), marks the service serving, starts the
// background work and serves.
func (s *Shell) Start() error {
	h := s.opts.HTTP
	ln, err := net.Listen("tcp", h.Addr)
	if err != nil {
		return fmt.Errorf("listen %s (http.addr): %w", h.Addr, err)
	}
	adminLn, err := net.Listen("tcp", h.AdminAddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("listen %s (http.admin_addr): %w", h.AdminAddr, err)
	}
	if h.MaxConnections > 0 {
		ln = newLimitListener(ln, h.MaxConnections)
	}
	s.listeners = [2]net.Listener{ln, adminLn}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.state.Store(int32(StateServing))
	for _, task := range s.tasks {
		s.running.Add(1)
		go func() {
			defer s.running.Done()
			task(ctx)
		}()
	}
	go func() { s.serveDone <- s.public.Serve(ln) }()
	go func() { s.serveDone <- s.admin.Serve(adminLn) }()
	attrs := append([]slog.Attr{slog.String("addr", s.Addr()), slog.String("admin_addr", s.AdminAddr())}, s.attrs...)
	s.opts.Logger.LogAttrs(context.Background(), slog.LevelInfo, s.opts.Name+" serving", attrs...)
	return nil
}

// Addr is the address the public listener listens on (after Start).
func (s *Shell) Addr() string { return s.listeners[0].Addr().String() }

// AdminAddr is the address the admin listener listens on (after Start).
func (s *Shell) AdminAddr() string { return s.listeners[1].Addr().String() }

// State reports where the service is in its life.
func (s *Shell) State() State { return State(s.state.Load()) }

// Run starts the service and stops it when ctx is done (SIGINT/SIGTERM
// in main) or a server fails. shutdown_timeout bounds what follows the
// drain delay.
func (s *Shell) Run(ctx context.Context) error {
	if err := s.Start(); err != nil {
		s.close()
		return err
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-s.serveDone:
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), s.opts.HTTP.DrainDelayOrDefault()+s.opts.ShutdownTimeout)
	defer cancel()
	return errors.Join(serveErr, s.Shutdown(stopCtx))
}

// Shutdown stops the service, in this order:
//
//  1. Mark draining: /readyz answers 503, and keep-alive connections are
//     closed after their next response, while new requests are still
//     served.
//  2. Wait http.drain_delay, so that load balancers (Kubernetes
//     endpoints) stop sending before the listener closes. ctx ending cuts
//     the wait short.
//  3. Shut HTTP down gracefully: requests in flight finish (a command
//     commits). If ctx ends first, the remaining connections are closed.
//  4. Stop the background work and wait for it: an outbox worker's
//     publish in flight is recorded (it ends at its publish timeout at
//     the latest), a consumer's message in hand is finished. The work
//     keeps going while HTTP drains.
//  5. Close what the work used (ShellOptions.Close): NATS, MySQL, last.
//
// Only the first call does the work; every call returns its result.
func (s *Shell) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.state.Store(int32(StateDraining))
		s.public.SetKeepAlivesEnabled(false)
		s.Step(StepDraining)
		s.waitDrainDelay(ctx)
		httpErr := s.stopHTTP(ctx)
		if s.cancel != nil {
			s.cancel()
		}
		s.running.Wait()
		s.Step(s.opts.WorkStopped)
		s.stopErr = errors.Join(httpErr, s.close())
		s.state.Store(int32(StateStopped))
	})
	return s.stopErr
}

// waitDrainDelay waits http.drain_delay, or until ctx ends.
func (s *Shell) waitDrainDelay(ctx context.Context) {
	t := time.NewTimer(s.opts.HTTP.DrainDelayOrDefault())
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		s.opts.Logger.WarnContext(ctx, "drain delay cut short", slog.Any("error", ctx.Err()))
	}
	s.Step(StepDrainDelay)
}

// stopHTTP shuts both servers down gracefully, and closes what is left
// when ctx ends first.
func (s *Shell) stopHTTP(ctx context.Context) error {
	var errs []error
	for _, srv := range []*http.Server{s.public, s.admin} {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err), srv.Close())
		}
	}
	for _, f := range s.onHTTPStopped {
		errs = append(errs, f())
	}
	s.Step(StepHTTPStopped)
	return errors.Join(errs...)
}

func (s *Shell) close() error {
	err := s.opts.Close()
	s.Step(s.opts.Closed)
	return err
}

// Step records and logs a lifecycle step.
func (s *Shell) Step(what string) {
	s.mu.Lock()
	s.steps = append(s.steps, what)
	s.mu.Unlock()
	s.opts.Logger.Info("lifecycle: " + what)
}

// Lifecycle returns the shutdown steps taken so far, in order.
func (s *Shell) Lifecycle() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.steps...)
}

// Probes adds /healthz and /readyz to mux.
//
// /healthz is liveness: 200 while the process can answer HTTP at all.
//
// /readyz is readiness, and it reflects this instance's lifecycle only:
// 200 while serving, 503 while starting and from the first moment of a
// shutdown (so that endpoints drop the pod during the drain delay). It
// does not check MySQL or the brokers, on purpose. The database is shared
// by every instance, so a readiness that followed it would take every pod
// out of the Service at once during a database outage, turning quick 500s
// (which clients retry) into refused connections, and would bring them
// all back at once into a database still recovering. A broker's trouble
// is the outbox's business: commands keep committing and the worker
// delivers later. Their health shows on /metrics and in the logs instead.
func (s *Shell) Probes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "alive"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if st := s.State(); st != StateServing {
			WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": st.String()})
			return
		}
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
}
