package main

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// deliver books the delivery of room r's place seq to consumer c, lag
// after its write, at second at of the run.
func deliver(t *testing.T, l *ledger, c string, r int, seq int64, at int, lag time.Duration) {
	t.Helper()
	recv := t0.Add(time.Duration(at) * time.Second)
	err := l.record(delivery{Consumer: c, ID: fmt.Sprintf("id-%d-%d", r, seq), Room: r, Seq: seq, WrittenAt: recv.Add(-lag), ReceivedAt: recv})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLedgerVerdicts(t *testing.T) {
	cases := []struct {
		name      string
		deliver   func(t *testing.T, l *ledger)
		committed []int64
		want      verdict // the counts only
	}{
		{
			name: "everything once, in order",
			deliver: func(t *testing.T, l *ledger) {
				for seq := int64(1); seq <= 3; seq++ {
					deliver(t, l, "c", 0, seq, 1, time.Millisecond)
					deliver(t, l, "c", 1, seq, 1, time.Millisecond)
				}
			},
			committed: []int64{3, 3},
			want:      verdict{Committed: 6, Deliveries: 6, Unique: 6},
		},
		{
			name: "lost: a gap, and the end of a room",
			deliver: func(t *testing.T, l *ledger) {
				deliver(t, l, "c", 0, 1, 1, 0)
				deliver(t, l, "c", 0, 3, 1, 0)
			},
			committed: []int64{4, 2},
			want:      verdict{Committed: 6, Deliveries: 2, Unique: 2, Lost: 4},
		},
		{
			name: "a duplicate is not an order violation",
			deliver: func(t *testing.T, l *ledger) {
				deliver(t, l, "c", 0, 1, 1, 0)
				deliver(t, l, "c", 0, 2, 1, 0)
				deliver(t, l, "c", 0, 1, 2, 0)
				deliver(t, l, "c", 0, 2, 2, 0)
			},
			committed: []int64{2, 0},
			want:      verdict{Committed: 2, Deliveries: 4, Unique: 2, Duplicates: 2},
		},
		{
			name: "a first delivery after a later place is a violation",
			deliver: func(t *testing.T, l *ledger) {
				deliver(t, l, "c", 1, 2, 1, 0)
				deliver(t, l, "c", 1, 1, 1, 0)
				deliver(t, l, "c", 1, 3, 1, 0)
			},
			committed: []int64{0, 3},
			want:      verdict{Committed: 3, Deliveries: 3, Unique: 3, OrderViolations: 1},
		},
		{
			name: "phantoms and strays",
			deliver: func(t *testing.T, l *ledger) {
				deliver(t, l, "c", 0, 1, 1, 0)
				deliver(t, l, "c", 0, 2, 1, 0) // never committed
				deliver(t, l, "c", 5, 1, 1, 0) // no such room
				deliver(t, l, "c", 1, 0, 1, 0) // no such place
			},
			committed: []int64{1, 0},
			want:      verdict{Committed: 1, Deliveries: 4, Unique: 2, Phantoms: 1, Strays: 2},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(2, []string{"c"}, t0)
			tc.deliver(t, l)
			got := l.verify(tc.committed)["c"]
			counts := verdict{Committed: got.Committed, Deliveries: got.Deliveries, Unique: got.Unique, Lost: got.Lost,
				Duplicates: got.Duplicates, OrderViolations: got.OrderViolations, Phantoms: got.Phantoms, Mismatches: got.Mismatches, Strays: got.Strays}
			if fmt.Sprint(counts) != fmt.Sprint(tc.want) {
				t.Errorf("got  %+v\nwant %+v", counts, tc.want)
			}
			if int(got.Lost) != len(got.LostSample) {
				t.Errorf("lost %d, but %d in the sample", got.Lost, len(got.LostSample))
			}
			if int(got.OrderViolations) != len(got.OrderSample) {
				t.Errorf("%d violations, but %d in the sample", got.OrderViolations, len(got.OrderSample))
			}
		})
	}
}

func TestLedgerLostSampleNamesPlaces(t *testing.T) {
	l := newLedger(1, []string{"c"}, t0)
	deliver(t, l, "c", 0, 2, 1, 0)
	v := l.verify([]int64{3})["c"]
	want := []place{{Room: 0, Seq: 1}, {Room: 0, Seq: 3}}
	if fmt.Sprint(v.LostSample) != fmt.Sprint(want) {
		t.Errorf("lost sample %v, want %v", v.LostSample, want)
	}
}

func TestLedgerConsumersAreSeparate(t *testing.T) {
	l := newLedger(1, []string{"default", "activity"}, t0)
	deliver(t, l, "default", 0, 1, 1, 0)
	deliver(t, l, "activity", 0, 1, 1, 0)
	deliver(t, l, "activity", 0, 1, 2, 0)
	v := l.verify([]int64{2})
	if v["default"].Duplicates != 0 || v["activity"].Duplicates != 1 {
		t.Errorf("duplicates default %d activity %d, want 0 and 1", v["default"].Duplicates, v["activity"].Duplicates)
	}
	if v["default"].Lost != 1 || v["activity"].Lost != 1 {
		t.Errorf("lost default %d activity %d, want 1 and 1", v["default"].Lost, v["activity"].Lost)
	}
	if err := l.record(delivery{Consumer: "audit", Room: 0, Seq: 1}); err == nil {
		t.Error("a delivery to a consumer outside the run was booked")
	}
}

func TestLedgerDuplicateCausesAndMismatches(t *testing.T) {
	l := newLedger(1, []string{"c"}, t0)
	l.setCause(func(at time.Time) string {
		if at.After(t0.Add(10 * time.Second)) {
			return "kill-worker@10s"
		}
		return noCause
	})
	deliver(t, l, "c", 0, 1, 1, 0)
	deliver(t, l, "c", 0, 1, 5, 0)  // before the fault
	deliver(t, l, "c", 0, 1, 11, 0) // after it
	if err := l.record(delivery{Consumer: "c", ID: "another", Room: 0, Seq: 1, ReceivedAt: t0.Add(12 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	v := l.verify([]int64{1})["c"]
	if v.DuplicateCauses[noCause] != 1 || v.DuplicateCauses["kill-worker@10s"] != 2 {
		t.Errorf("causes %v, want none 1 and kill-worker@10s 2", v.DuplicateCauses)
	}
	if v.Mismatches != 1 {
		t.Errorf("mismatches %d, want 1", v.Mismatches)
	}
}

func TestLedgerLagFiguresAndIntervals(t *testing.T) {
	l := newLedger(1, []string{"c"}, t0.Add(10*time.Second))
	deliver(t, l, "c", 0, 1, 5, time.Second) // in the warm-up
	deliver(t, l, "c", 0, 2, 11, 10*time.Millisecond)
	deliver(t, l, "c", 0, 2, 12, time.Hour) // a duplicate: no lag
	iv := l.takeInterval()["c"]
	if iv.Deliveries != 3 || iv.Unique != 2 || iv.Duplicates != 1 || iv.Lag.MaxMs != 1000 {
		t.Errorf("interval %+v, want 3 deliveries, 2 unique, 1 duplicate, max lag 1000ms", iv)
	}
	if iv := l.takeInterval()["c"]; iv.Deliveries != 0 || iv.Lag.Count != 0 {
		t.Errorf("the next interval starts empty: %+v", iv)
	}
	v := l.verify([]int64{2})["c"]
	if v.Lag.All.Count != 2 || v.Lag.All.MaxMs != 1000 {
		t.Errorf("all lags %+v, want 2 with max 1000ms", v.Lag.All)
	}
	if v.Lag.Steady.Count != 1 || v.Lag.Steady.MaxMs != 10 {
		t.Errorf("lags after warm-up %+v, want 1 of 10ms", v.Lag.Steady)
	}
}

// The receiver books from many goroutines at once.
func TestLedgerConcurrentRecords(t *testing.T) {
	l := newLedger(8, []string{"a", "b"}, t0)
	var wg sync.WaitGroup
	for r := range 8 {
		for _, c := range []string{"a", "b"} {
			wg.Go(func() {
				for seq := int64(1); seq <= 500; seq++ {
					_ = l.record(delivery{Consumer: c, ID: fmt.Sprint(r, seq), Room: r, Seq: seq, ReceivedAt: t0})
				}
			})
		}
	}
	wg.Go(func() {
		for range 100 {
			l.takeInterval()
			l.uniqueCounts()
		}
	})
	wg.Wait()
	committed := []int64{500, 500, 500, 500, 500, 500, 500, 500}
	for c, v := range l.verify(committed) {
		if v.Unique != 4000 || v.Lost != 0 || v.OrderViolations != 0 {
			t.Errorf("%s: %+v", c, v)
		}
	}
}
