package main

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseFaults(t *testing.T) {
	got, err := parseFaults("sink-slow:2s@8m+20s, kill-worker:1@2m,kill-conns@3m,db-restart@5m,sink-down@6m+5s,sink-503@7m,net-stall@9m")
	if err != nil {
		t.Fatal(err)
	}
	want := []fault{
		{Kind: killWorker, Param: "1", At: 2 * time.Minute},
		{Kind: killConns, At: 3 * time.Minute},
		{Kind: dbRestart, At: 5 * time.Minute},
		{Kind: sinkDown, At: 6 * time.Minute, For: 5 * time.Second},
		{Kind: sink503, At: 7 * time.Minute, For: 15 * time.Second},
		{Kind: sinkSlow, Param: "2s", At: 8 * time.Minute, For: 20 * time.Second},
		{Kind: netStall, At: 9 * time.Minute, For: 10 * time.Second},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if got, err := parseFaults(""); err != nil || len(got) != 0 {
		t.Errorf("no faults: %v, %v", got, err)
	}
}

func TestParseFaultsRefuses(t *testing.T) {
	for spec, want := range map[string]string{
		"kill-worker":         "KIND[:PARAM]@AT",
		"reboot@1m":           "no fault",
		"kill-worker@soon":    "AT",
		"kill-worker@1m+10s":  "no +FOR",
		"sink-down@1m+never":  "FOR",
		"sink-down@1m+0s":     "FOR",
		"kill-worker:x@1m":    "slot",
		"sink-slow:fast@1m":   "late",
		"net-stall:hard@1m":   "no PARAM",
		"kill-conns@-1m":      "AT",
		"sink-503@1m,oops@2m": "oops",
	} {
		if _, err := parseFaults(spec); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--faults") {
			t.Errorf("%q: error %v, want one naming --faults and %q", spec, err, want)
		}
	}
}

func TestCheckSchedule(t *testing.T) {
	cases := []struct {
		spec, restart string
		want          string
	}{
		{"kill-worker@30s,sink-down@50s", "", ""},
		{"kill-worker@1m", "", "after --duration"},
		{"db-restart@10s", "", "--db-restart-cmd"},
		{"db-restart@10s", "true", ""},
		{"kill-worker:3@10s", "", "slot 3"},
	}
	for _, tc := range cases {
		faults, err := parseFaults(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		err = checkSchedule(faults, time.Minute, 3, tc.restart)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// A random schedule takes every kind once before any twice, keeps to
// the gaps, and is the same for the same seed.
func TestRandomFaults(t *testing.T) {
	kinds := []faultKind{killWorker, killConns, sinkDown}
	draw := func(seed uint64) []fault {
		return randomFaults(rand.New(rand.NewPCG(seed, 1)), kinds, 2*time.Minute, 5*time.Minute, time.Minute, time.Hour)
	}
	got := draw(42)
	if !reflect.DeepEqual(got, draw(42)) {
		t.Fatal("the same seed drew another schedule")
	}
	if len(got) < 11 || len(got) > 30 {
		t.Fatalf("%d faults in an hour at one every 2-5 minutes", len(got))
	}
	prev := time.Minute
	for i, f := range got {
		if gap := f.At - prev; gap < 2*time.Minute || gap > 5*time.Minute {
			t.Errorf("fault %d at %v: gap %v", i, f.At, gap)
		}
		prev = f.At
		if i%3 == 2 {
			seen := map[faultKind]bool{got[i-2].Kind: true, got[i-1].Kind: true, f.Kind: true}
			if len(seen) != 3 {
				t.Errorf("faults %d-%d are %v: a kind twice in one round", i-2, i, seen)
			}
		}
		if lasts, _ := lastsByDefault(f.Kind); f.For != lasts {
			t.Errorf("%s lasts %v, want the default %v", f.label(), f.For, lasts)
		}
	}
	if f := got[len(got)-1]; f.At >= time.Hour {
		t.Errorf("the last fault %v is after the end", f.At)
	}
}

func TestScheduleFromFlags(t *testing.T) {
	args := []string{"--driver", "mysql", "--dsn", "x", "--duration", "20m", "--warmup", "1m", "--fault-every", "2m-3m", "--seed", "9", "--workers", "2"}
	cfg, err := parseRunFlags(args, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Faults) < 6 {
		t.Fatalf("%d faults in 19 minutes at one every 2-3", len(cfg.Faults))
	}
	kinds := map[faultKind]bool{}
	for _, f := range cfg.Faults {
		kinds[f.Kind] = true
		if f.Kind == killWorker && f.Param != "0" && f.Param != "1" {
			t.Errorf("%s: slot %q of 2", f.label(), f.Param)
		}
	}
	if kinds[dbRestart] {
		t.Error("db-restart drawn without --db-restart-cmd")
	}
	again, _ := parseRunFlags(args, nil)
	if !reflect.DeepEqual(cfg.Faults, again.Faults) {
		t.Error("the same --seed drew another schedule")
	}
	if _, err := parseRunFlags(append(args[:8:8], "--fault-kinds", "kill-worker"), nil); err == nil {
		t.Error("--fault-kinds without --fault-every was taken")
	}
}
