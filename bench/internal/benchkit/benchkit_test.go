package benchkit

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"
)

func TestParseConfigs(t *testing.T) {
	got, err := ParseConfigs("4x200x512, 1x100x256")
	if err != nil {
		t.Fatal(err)
	}
	want := []Config{{Workers: 4, Batch: 200, Payload: 512}, {Workers: 1, Batch: 100, Payload: 256}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("ParseConfigs: %v, want %v", got, want)
	}
	if s := FormatConfigs(got); s != "4x200x512,1x100x256" {
		t.Fatalf("FormatConfigs: %q", s)
	}
	for _, bad := range []string{"", "4x200", "4x0x512", "4xax512", "4x200x512x1"} {
		if _, err := ParseConfigs(bad); err == nil {
			t.Errorf("ParseConfigs(%q): no error", bad)
		}
	}
}

func TestQuantile(t *testing.T) {
	sorted := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.5, 6}, {0.99, 10}, {1, 10}} {
		if got := Quantile(sorted, c.q); got != c.want {
			t.Errorf("Quantile(%v): %v, want %v", c.q, got, c.want)
		}
	}
	if got := Quantile(nil, 0.5); got != 0 {
		t.Errorf("Quantile of none: %v", got)
	}
}

func TestReadStat(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	st, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PPID != os.Getppid() {
		t.Errorf("PPID %d, want %d", st.PPID, os.Getppid())
	}
	if _, err := ReadStat(-1); err == nil {
		t.Error("ReadStat(-1): no error")
	}
}

func TestPace(t *testing.T) {
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	// 800 events a second for 50ms: 40 events, 5 for each of 8 writers.
	sent, _, err := Pace(800, 50*time.Millisecond, func(id string, _ int) error {
		mu.Lock()
		defer mu.Unlock()
		seen[id] = true
		return nil
	})
	if err != nil || sent != 40 || len(seen) != 40 {
		t.Fatalf("Pace: %d sent, %d IDs, %v", sent, len(seen), err)
	}
	sent, _, err = Pace(800, 50*time.Millisecond, func(string, int) error { return os.ErrClosed })
	if !errors.Is(err, os.ErrClosed) || sent != 0 {
		t.Fatalf("Pace with failing writes: %d sent, %v", sent, err)
	}
}
