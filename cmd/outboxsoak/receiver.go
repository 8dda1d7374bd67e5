package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The receiver's protocol. A worker's sink posts a message's payload to
// /deliver/{consumer} with the message's ID in headerEventID, and counts
// 204 as delivered; worker processes post their workerStatus to /status.
const (
	headerEventID = "Soak-Event-Id"
	pathDeliver   = "/deliver/"
	pathStatus    = "/status"
)

// workerStatus is what a worker process reports of itself.
type workerStatus struct {
	Slot       int    `json:"slot"`
	PID        int    `json:"pid"`
	RSSBytes   uint64 `json:"rss_bytes"`
	HeapBytes  uint64 `json:"heap_bytes"`
	Goroutines int    `json:"goroutines"`
	// DBOpen and DBInUse are its pool's connections (database/sql's
	// Stats); a Listener holds one more of its own.
	DBOpen  int `json:"db_open"`
	DBInUse int `json:"db_in_use"`
	// At is when the receiver got it.
	At time.Time `json:"-"`
}

// receiver is the counting receiver: it books every delivery in the
// ledger, with the time it arrived, and keeps each worker process's
// latest status.
type receiver struct {
	ledger  *ledger
	logger  *slog.Logger
	handler http.Handler
	addr    string // kept across a down and up

	srvMu sync.Mutex
	srv   *http.Server // nil while down
	done  chan error

	// Faults: refuse answers 503 to every delivery; delay answers each
	// one this many nanoseconds late (having booked it).
	refuse atomic.Bool
	delay  atomic.Int64

	mu       sync.Mutex
	statuses map[int]workerStatus // by slot

	// refused counts deliveries it could not book (a bad payload, a
	// consumer outside the run): each is answered 400.
	refused atomic.Int64
}

// startReceiver serves on a loopback port until close.
func startReceiver(l *ledger, logger *slog.Logger) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{ledger: l, logger: logger, addr: ln.Addr().String(), statuses: map[int]workerStatus{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathDeliver+"{consumer}", r.deliver)
	mux.HandleFunc("POST "+pathStatus, r.status)
	r.handler = mux
	r.serve(ln)
	return r, nil
}

// serve serves on ln in the background.
func (r *receiver) serve(ln net.Listener) {
	r.srvMu.Lock()
	defer r.srvMu.Unlock()
	srv := &http.Server{Handler: r.handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	r.srv, r.done = srv, done
}

// url is the receiver's base URL.
func (r *receiver) url() string { return "http://" + r.addr }

// detach takes the running server out of r (nil while down) with the
// channel its Serve's error arrives on, for down and close to stop it.
func (r *receiver) detach() (*http.Server, chan error) {
	r.srvMu.Lock()
	defer r.srvMu.Unlock()
	srv, done := r.srv, r.done
	r.srv = nil
	return srv, done
}

// down stops listening and drops every connection: senders see their
// connections refused until up.
func (r *receiver) down() error {
	srv, done := r.detach()
	if srv == nil {
		return nil
	}
	err := srv.Close()
	<-done
	return err
}

// up listens again on the same address, trying for a while in case the
// port is briefly in use.
func (r *receiver) up(ctx context.Context) error {
	for {
		ln, err := net.Listen("tcp", r.addr)
		if err == nil {
			r.serve(ln)
			return nil
		}
		if !sleepUntil(ctx, time.Now().Add(100*time.Millisecond)) {
			return fmt.Errorf("listen on %s again: %w", r.addr, err)
		}
	}
}

func (r *receiver) deliver(w http.ResponseWriter, req *http.Request) {
	if r.refuse.Load() {
		http.Error(w, "receiver: refusing (sink-503)", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<16))
	received := time.Now()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p, err := decodePayload(body)
	if err == nil {
		err = r.ledger.record(delivery{Consumer: req.PathValue("consumer"), ID: req.Header.Get(headerEventID),
			Room: p.Room, Seq: p.Seq, WrittenAt: time.Unix(0, p.WrittenNs), ReceivedAt: received})
	}
	if err != nil {
		if n := r.refused.Add(1); n <= 5 {
			r.logger.Error("the receiver refused a delivery", slog.String("error", err.Error()))
		}
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if d := time.Duration(r.delay.Load()); d > 0 { // booked, answered late: the sender may give up and send again
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-req.Context().Done():
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) status(w http.ResponseWriter, req *http.Request) {
	var st workerStatus
	if err := json.NewDecoder(io.LimitReader(req.Body, 1<<16)).Decode(&st); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	st.At = time.Now()
	r.mu.Lock()
	r.statuses[st.Slot] = st
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// workerStatuses returns the latest status of every slot that reported.
func (r *receiver) workerStatuses() map[int]workerStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.statuses)
}

// close stops serving, waiting for requests in progress until ctx ends.
func (r *receiver) close(ctx context.Context) error {
	srv, done := r.detach()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if serveErr := <-done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}
