package webhook_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/sink/sinktest"
	"github.com/outboxrelay/outboxrelay/sink/webhook"
)

// loopback allows the tests' servers on 127.0.0.1.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// receiver is a webhook endpoint on loopback as a receiving service
// would run one: it verifies every request (401 if it fails), answers
// 422 to messages of type "Rejected", and keeps what it accepted. It can
// go away (its listener and connections closed: connection refused)
// and come back on the same address.
type receiver struct {
	secrets []string
	addr    string

	mu        sync.Mutex
	srv       *http.Server
	done      bool // its test is over: it does not come back
	got       []sinktest.Delivery
	malformed []error // accepted requests it could not decode
}

// transportHeaders are the headers that are not the message's own.
var transportHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "User-Agent": true, "Accept-Encoding": true, "Authorization": true,
	webhook.HeaderID: true, webhook.HeaderTimestamp: true, webhook.HeaderSignature: true,
	webhook.HeaderEventType: true, webhook.HeaderEventKey: true,
}

func newReceiver(t *testing.T, secrets ...string) *receiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &receiver{secrets: secrets, addr: ln.Addr().String()}
	r.serve(ln)
	t.Cleanup(func() {
		r.mu.Lock()
		r.done = true
		r.mu.Unlock()
		r.stop()
	})
	return r
}

func (r *receiver) url() string { return "http://" + r.addr + "/hooks" }

func (r *receiver) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: time.Minute}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// stop closes the listener and every connection.
func (r *receiver) stop() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// start listens again on the same address, unless its test is over.
func (r *receiver) start(t *testing.T) {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done {
		return
	}
	var ln net.Listener
	require.Eventually(t, func() bool {
		var err error
		ln, err = net.Listen("tcp", r.addr)
		return err == nil
	}, time.Minute, 10*time.Millisecond, "listen again on %s", r.addr)
	r.serve(ln)
}

func (r *receiver) handle(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, 16<<20))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err := webhook.Verify(r.secrets, req.Header, body, 0); err != nil {
		http.Error(w, "verification failed", http.StatusUnauthorized)
		return
	}
	d, err := decode(req.Header, body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.malformed = append(r.malformed, err)
		http.Error(w, "malformed", http.StatusBadRequest)
		return
	}
	if d.Type == "Rejected" {
		http.Error(w, "this type is not taken here", http.StatusUnprocessableEntity)
		return
	}
	r.got = append(r.got, d)
	w.WriteHeader(http.StatusNoContent)
}

// decode turns a verified request back into the message's fields.
func decode(h http.Header, body []byte) (sinktest.Delivery, error) {
	d := sinktest.Delivery{Payload: body, Headers: map[string]string{}}
	var errs []error
	for _, f := range []struct {
		header string
		into   *string
	}{{webhook.HeaderID, &d.ID}, {webhook.HeaderEventType, &d.Type}, {webhook.HeaderEventKey, &d.Key}} {
		v, err := webhook.DecodeHeaderValue(h.Get(f.header))
		*f.into = v
		errs = append(errs, err)
	}
	for name, values := range h {
		if !transportHeaders[name] {
			if len(values) != 1 {
				errs = append(errs, errors.New("header "+name+" sent "+strings.Repeat("twice or more", 1)))
			}
			d.Headers[name] = values[0]
		}
	}
	return d, errors.Join(errs...)
}

// received is what the receiver accepted, or the first request it could
// not decode.
func (r *receiver) received() ([]sinktest.Delivery, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.malformed) > 0 {
		return nil, r.malformed[0]
	}
	return append([]sinktest.Delivery(nil), r.got...), nil
}
