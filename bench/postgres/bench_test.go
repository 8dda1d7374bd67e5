package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
)

// TestQuickBench runs the quick bench end to end against the server in
// OUTBOXRELAY_TEST_POSTGRES_DSN, and checks that every arm delivered
// every event of every drain exactly once and left none undelivered. It
// asserts no figure: a shared, loaded server makes them meaningless here.
func TestQuickBench(t *testing.T) {
	dsn := os.Getenv("OUTBOXRELAY_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Fatal("OUTBOXRELAY_TEST_POSTGRES_DSN is not set: the bench needs a PostgreSQL server (such as postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b, err := open(ctx, dsn, fmt.Sprintf("outboxrelay_pgbench_test_%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	type drain struct {
		arm                  string
		c                    compareConfig
		due, delivered, left int
	}
	var (
		mu     sync.Mutex
		drains []drain
	)
	b.onDrain = func(arm string, c compareConfig, due, delivered, left int) {
		mu.Lock()
		defer mu.Unlock()
		drains = append(drains, drain{arm, c, due, delivered, left})
	}
	sz := quick
	sz.compareEvents, sz.consumerEvents = 300, 300
	rows, err := b.run(ctx, sz, "", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("the bench reported nothing")
	}
	seen := map[string]int{}
	for _, d := range drains {
		seen[d.arm]++
		if d.delivered != d.due || d.left != 0 {
			t.Errorf("%s, %s: %d deliveries due, %d made, %d left undelivered", d.arm, benchkit.FormatConfigs([]compareConfig{d.c}), d.due, d.delivered, d.left)
		}
	}
	for _, a := range allArms() {
		if want := len(sz.compareConfigs) * sz.compareRounds; seen[a.name] != want {
			t.Errorf("%s: %d drains, want %d", a.name, seen[a.name], want)
		}
	}
	for _, k := range sz.consumerCounts {
		if a := consumersArm(k); seen[a.name] != sz.compareRounds {
			t.Errorf("%s: %d drains, want %d", a.name, seen[a.name], sz.compareRounds)
		}
	}
	var report strings.Builder
	benchkit.PrintRows(&report, rows)
	t.Log("\n" + report.String())
}
