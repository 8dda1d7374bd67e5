package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// faultKind names a fault the run can inject.
type faultKind string

// The faults, each what production has: a worker process dies, the
// workers' connections are killed, the database restarts, the sink is
// down, refuses or is slow, the network to the database stalls.
const (
	killWorker faultKind = "kill-worker" // SIGKILL a worker process (PARAM: its slot); it is started again
	killConns  faultKind = "kill-conns"  // the server kills every worker process's session (KILL, pg_terminate_backend)
	dbRestart  faultKind = "db-restart"  // --db-restart-cmd; the fault lasts until the database answers again
	sinkDown   faultKind = "sink-down"   // the receiver stops listening: connections are refused
	sink503    faultKind = "sink-503"    // the receiver answers 503 to every delivery
	sinkSlow   faultKind = "sink-slow"   // the receiver answers each delivery late (PARAM: how late, default 1s)
	netStall   faultKind = "net-stall"   // the proxy between the worker processes and the database forwards nothing
)

// faultKinds are the kinds, in the order the docs list them, with how
// long each lasts by default (0: a moment).
var faultKinds = []struct {
	kind  faultKind
	lasts time.Duration
}{
	{killWorker, 0}, {killConns, 0}, {dbRestart, 0},
	{sinkDown, 15 * time.Second}, {sink503, 15 * time.Second}, {sinkSlow, 20 * time.Second}, {netStall, 10 * time.Second},
}

// defaultSlowDelay is how late a sink-slow receiver answers by default:
// past the after-commit publish's 500ms, within the worker's 3s.
const defaultSlowDelay = time.Second

// fault is one fault of the schedule.
type fault struct {
	Kind faultKind `json:"kind"`
	// Param is the slot of kill-worker, the delay of sink-slow.
	Param string        `json:"param,omitempty"`
	At    time.Duration `json:"-"` // after the writers start
	For   time.Duration `json:"-"` // how long it lasts; 0 for a moment
}

// label names f in the report and in duplicate causes: kind@at.
func (f fault) label() string { return string(f.Kind) + "@" + f.At.String() }

// MarshalJSON writes At and For as duration strings.
func (f fault) MarshalJSON() ([]byte, error) {
	type plain fault
	return json.Marshal(struct {
		plain
		At  string `json:"at"`
		For string `json:"for,omitempty"`
	}{plain(f), f.At.String(), durationText(f.For)})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (f *fault) UnmarshalJSON(b []byte) error {
	type plain fault
	var v struct {
		plain
		At  string `json:"at"`
		For string `json:"for"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = fault(v.plain)
	var err error
	if f.At, err = time.ParseDuration(v.At); err != nil {
		return fmt.Errorf("fault: %w", err)
	}
	if v.For != "" {
		f.For, err = time.ParseDuration(v.For)
	}
	return err
}

func durationText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// lastsByDefault returns how long kind lasts when the schedule does not
// say, and whether kind is a fault at all.
func lastsByDefault(kind faultKind) (time.Duration, bool) {
	for _, k := range faultKinds {
		if k.kind == kind {
			return k.lasts, true
		}
	}
	return 0, false
}

// parseFaults parses --faults: faults separated by commas, each
// KIND[:PARAM]@AT[+FOR], such as kill-worker@2m, sink-slow:2s@8m+20s.
// AT and FOR are Go durations; FOR defaults to the kind's.
func parseFaults(spec string) ([]fault, error) {
	out, err := parseList(spec, func(item string) (fault, error) {
		f, err := parseFault(item)
		if err != nil {
			return f, fmt.Errorf("--faults %q: %w", item, err)
		}
		return f, nil
	})
	slices.SortStableFunc(out, func(a, b fault) int { return int(a.At - b.At) })
	return out, err
}

// parseList parses a comma-separated list, skipping empty items, with
// parse for each item; it stops at the first item parse refuses.
func parseList[T any](spec string, parse func(item string) (T, error)) ([]T, error) {
	var out []T
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		v, err := parse(item)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func parseFault(item string) (fault, error) {
	head, when, ok := strings.Cut(item, "@")
	if !ok {
		return fault{}, fmt.Errorf("want KIND[:PARAM]@AT[+FOR]")
	}
	kind, param, _ := strings.Cut(head, ":")
	f := fault{Kind: faultKind(kind), Param: param}
	lasts, known := lastsByDefault(f.Kind)
	if !known {
		return f, fmt.Errorf("no fault %q: the kinds are %s", kind, kindList())
	}
	at, length, hasLength := strings.Cut(when, "+")
	var err error
	if f.At, err = time.ParseDuration(at); err != nil || f.At < 0 {
		return f, fmt.Errorf("AT %q: want a duration such as 2m", at)
	}
	f.For = lasts
	if hasLength {
		if lasts == 0 {
			return f, fmt.Errorf("%s happens at a moment: no +FOR", kind)
		}
		if f.For, err = time.ParseDuration(length); err != nil || f.For <= 0 {
			return f, fmt.Errorf("FOR %q: want a positive duration such as 15s", length)
		}
	}
	return f, f.checkParam()
}

// checkParam checks the kind's parameter.
func (f fault) checkParam() error {
	switch {
	case f.Param == "":
		return nil
	case f.Kind == killWorker:
		if n, err := strconv.Atoi(f.Param); err != nil || n < 0 {
			return fmt.Errorf("PARAM %q: want a worker slot, from 0", f.Param)
		}
	case f.Kind == sinkSlow:
		if d, err := time.ParseDuration(f.Param); err != nil || d <= 0 {
			return fmt.Errorf("PARAM %q: want how late the receiver answers, such as 2s", f.Param)
		}
	default:
		return fmt.Errorf("%s takes no PARAM", f.Kind)
	}
	return nil
}

func kindList() string {
	names := make([]string, len(faultKinds))
	for i, k := range faultKinds {
		names[i] = string(k.kind)
	}
	return strings.Join(names, ", ")
}

// parseKinds parses --fault-kinds, a comma-separated list of kinds.
func parseKinds(spec string) ([]faultKind, error) {
	return parseList(spec, func(k string) (faultKind, error) {
		if _, ok := lastsByDefault(faultKind(k)); !ok {
			return "", fmt.Errorf("--fault-kinds: no fault %q: the kinds are %s", k, kindList())
		}
		return faultKind(k), nil
	})
}

// parseGap parses --fault-every: MIN-MAX (2m-5m) or one duration.
func parseGap(spec string) (lo, hi time.Duration, err error) {
	a, b, ranged := strings.Cut(spec, "-")
	if lo, err = time.ParseDuration(a); err != nil {
		return 0, 0, fmt.Errorf("--fault-every %q: want MIN-MAX such as 2m-5m", spec)
	}
	hi = lo
	if ranged {
		if hi, err = time.ParseDuration(b); err != nil {
			return 0, 0, fmt.Errorf("--fault-every %q: want MIN-MAX such as 2m-5m", spec)
		}
	}
	if lo < time.Second || hi < lo {
		return 0, 0, fmt.Errorf("--fault-every %q: MIN must be at least 1s and MAX at least MIN", spec)
	}
	return lo, hi, nil
}

// randomFaults returns a schedule of kinds, taken in turn from a shuffle
// of kinds so that every kind comes once before any comes again, one
// after every gap between lo and hi (drawn from rng), from the end of
// the warm-up until end.
func randomFaults(rng *rand.Rand, kinds []faultKind, lo, hi, from, end time.Duration) []fault {
	var out []fault
	var deck []faultKind
	for at := from + draw(rng, lo, hi); at < end; at += draw(rng, lo, hi) {
		if len(deck) == 0 {
			deck = slices.Clone(kinds)
			rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		lasts, _ := lastsByDefault(deck[0])
		out = append(out, fault{Kind: deck[0], At: at, For: lasts})
		deck = deck[1:]
	}
	return out
}

// draw returns a duration between lo and hi, to the second.
func draw(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	d := lo
	if hi > lo {
		d += time.Duration(rng.Int64N(int64(hi - lo + 1)))
	}
	return d.Round(time.Second)
}

// assignSlots gives each kill-worker without a slot one drawn from rng.
func assignSlots(rng *rand.Rand, faults []fault, workers int) {
	for i := range faults {
		if faults[i].Kind == killWorker && faults[i].Param == "" {
			faults[i].Param = strconv.Itoa(rng.IntN(workers))
		}
	}
}

// checkSchedule checks a schedule against the run: every fault starts
// before the writers stop, every kill-worker names a slot that exists,
// and a database restart has a command.
func checkSchedule(faults []fault, duration time.Duration, workers int, restartCmd string) error {
	for _, f := range faults {
		switch {
		case f.At >= duration:
			return fmt.Errorf("--faults: %s starts after --duration %v", f.label(), duration)
		case f.Kind == dbRestart && restartCmd == "":
			return fmt.Errorf("--faults: %s needs --db-restart-cmd", f.label())
		case f.Kind == killWorker && f.Param != "":
			if n, _ := strconv.Atoi(f.Param); n >= workers {
				return fmt.Errorf("--faults: %s: slot %s, but --workers is %d", f.label(), f.Param, workers)
			}
		}
	}
	return nil
}
