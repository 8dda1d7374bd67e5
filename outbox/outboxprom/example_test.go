package outboxprom_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxprom"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// A worker's Observer counts what it delivers, and the backlog is read
// from the store when Prometheus scrapes. Serve reg with promhttp. (Runs
// in memory, with outboxtest.NewStore; with store/mysql, pass the
// *mysql.Store, or the *mysql.ConsumerStore and its name as Consumer.)
func Example() {
	ctx := context.Background()
	store := outboxtest.NewStore()
	reg := prometheus.NewRegistry()
	metrics, err := outboxprom.New(reg, outboxprom.Options{
		Name: "orders_outbox", Stats: store,
		StatsInterval: -1, // read the backlog on every scrape (the default reuses a reading for 2s)
	})
	if err != nil {
		log.Fatal(err)
	}
	sink := outbox.SinkFunc(func(context.Context, outbox.Message) error { return nil })
	worker, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{
		Name: "orders_outbox", Observer: metrics, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}

	tx := store.Begin()
	if err := store.Enqueue(ctx, tx, nil, outbox.Message{ID: "evt-1", Type: "OrderPaid"}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending before:", sample(reg, "outbox_pending"))
	if _, err := worker.ProcessBatch(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending after:", sample(reg, "outbox_pending"))
	fmt.Println("published:", sample(reg, "outbox_publish_success_total"))
	// Output:
	// pending before: outbox_pending{consumer="default",outbox="orders_outbox"} 1
	// pending after: outbox_pending{consumer="default",outbox="orders_outbox"} 0
	// published: outbox_publish_success_total{consumer="default",event_type="OrderPaid",outbox="orders_outbox",path="worker"} 1
}

// sample returns the first sample of the named metric as the text
// format prints it, as a scrape would see it.
func sample(reg prometheus.Gatherer, name string) string {
	var text strings.Builder
	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		m := f.GetMetric()[0]
		text.WriteString(name + "{")
		for i, l := range m.GetLabel() {
			if i > 0 {
				text.WriteString(",")
			}
			fmt.Fprintf(&text, "%s=%q", l.GetName(), l.GetValue())
		}
		fmt.Fprintf(&text, "} %g", m.GetCounter().GetValue()+m.GetGauge().GetValue())
	}
	return text.String()
}
