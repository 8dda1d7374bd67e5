package webhook_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/webhook"
)

// A receiver verifies each request and deduplicates by its ID; the sink
// signs and sends. (The receiver runs on loopback here, which the sink
// refuses unless AllowNetworks lists it.)
func Example() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // webhook.NewSecret() makes one
	verifier := webhook.Verifier{Secrets: []string{secret}}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := verifier.Verify(r.Header, body); err != nil {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		id, _ := webhook.DecodeHeaderValue(r.Header.Get(webhook.HeaderID))
		fmt.Printf("received %s (%s): %s\n", id, r.Header.Get(webhook.HeaderEventType), body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	sink, err := webhook.New(webhook.Config{
		URL:           receiver.URL + "/hooks/orders",
		Secrets:       []string{secret},
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sink.Close()
	err = sink.Publish(context.Background(), outbox.Message{ID: "evt-1", Key: "order-7", Type: "OrderPlaced", Payload: []byte(`{"order":7}`)})
	fmt.Println("published:", err)

	// The worker waits at least what an endpoint asks for with Retry-After.
	_ = outbox.WorkerOptions{Retry: webhook.RespectRetryAfter{Policy: outbox.Exponential{}}}
	// Output:
	// received evt-1 (OrderPlaced): {"order":7}
	// published: <nil>
}
