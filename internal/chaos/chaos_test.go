//go:build chaos

// Package chaos proves under real faults that the outbox loses nothing:
// worker processes are killed with SIGKILL and restarted, their database
// connections are killed, the sink fails and hangs at random, and the
// database server itself is stopped and started again, while 20,000
// events over 200 keys are delivered in ordering mode. It runs once per
// store (see targets), in CI:
//
//	go test -tags chaos -count=1 -timeout=30m -v ./internal/chaos/
//
// Stopping the server needs a local server that this user may stop and
// start: CHAOS_DB_STOP and CHAOS_DB_START (CHAOS_PG_STOP and
// CHAOS_PG_START for PostgreSQL) override the commands. A module of its
// own, as it runs every store.
package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

const (
	table    = "chaos_outbox"
	keys     = 200
	perKey   = 100 // 20,000 events
	workers  = 3
	deadline = 15 * time.Minute
)

func TestMain(m *testing.M) {
	if os.Getenv(envRole) == "worker" {
		os.Exit(runWorkerProcess())
	}
	os.Exit(pgtest.Main(m))
}

func eventID(key, seq int) string { return fmt.Sprintf("e-%03d-%03d", key, seq) }

// rig runs the worker processes and injects the faults.
type rig struct {
	t      *testing.T
	target *target
	db     *database
	dir    string
	rng    *rand.Rand
	procs  [workers]*proc
	spawns int
	// kills maps a killed worker's pid to when it was killed.
	kills      map[int]int64
	connKills  int
	dbDownTime time.Duration
}

type proc struct {
	cmd  *exec.Cmd
	log  string // its event log
	done chan struct{}
}

func (r *rig) spawn(i int) {
	r.spawns++
	n := r.spawns
	log := filepath.Join(r.dir, fmt.Sprintf("worker-%d-%03d.log", i, n))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envRole+"=worker", envTarget+"="+r.target.name, envDSN+"="+r.db.dsn, envIndex+"="+fmt.Sprint(i), envSeed+"="+fmt.Sprint(n), envLog+"="+log)
	stderr, err := os.Create(filepath.Join(r.dir, fmt.Sprintf("stderr-%d-%03d.log", i, n)))
	require.NoError(r.t, err)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	require.NoError(r.t, cmd.Start())
	p := &proc{cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		stderr.Close()
		close(p.done)
	}()
	r.procs[i] = p
}

// killOne SIGKILLs a random worker and starts a new one in its place.
func (r *rig) killOne() {
	i := r.rng.IntN(workers)
	p := r.procs[i]
	r.kills[p.cmd.Process.Pid] = time.Now().UnixNano()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	time.Sleep(time.Duration(100+r.rng.IntN(600)) * time.Millisecond) // down a moment
	r.spawn(i)
}

// restartDB stops the database server and starts it again.
func (r *rig) restartDB() {
	stop, start := envOr(r.target.stopEnv, r.target.stop), envOr(r.target.startEnv, r.target.start)
	began := time.Now()
	out, err := exec.Command("bash", "-c", stop).CombinedOutput()
	require.NoError(r.t, err, "stop the database: %s", out)
	outboxtest.EventuallyWithin(r.t, 60*time.Second, "the database to be down", func() bool { return r.db.db.Ping() != nil })
	time.Sleep(1500 * time.Millisecond) // an outage, not a blip
	out, err = exec.Command("bash", "-c", start).CombinedOutput()
	require.NoError(r.t, err, "start the database: %s", out)
	outboxtest.EventuallyWithin(r.t, 2*time.Minute, "the database to answer again", func() bool { return r.db.db.Ping() == nil })
	r.dbDownTime = time.Since(began)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// produce writes the events, one transaction per round of one event per
// key: the writes of a key are serialized, which is what per-key order
// rests on. It retries through the faults, however long they last, until
// ctx ends (the suite's deadline: a count of tries would assume how fast
// each fails); a duplicate ID on a retry means the previous try had
// committed.
func produce(ctx context.Context, s backend.Store, db *sql.DB, rounds *atomic.Int64) error {
	for seq := range perKey {
		ms := make([]outbox.Message, keys)
		for k := range keys {
			ms[k] = outbox.Message{ID: eventID(k, seq), Key: fmt.Sprintf("k-%03d", k), Type: "ChaosEvent",
				Payload: fmt.Appendf(nil, `{"key":%d,"seq":%d}`, k, seq)}
		}
		for {
			err := s.Enqueue(ctx, db, nil, ms...) // one INSERT: all or nothing
			if err == nil || errors.Is(err, outbox.ErrDuplicateID) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("round %d: %w", seq, err)
			case <-time.After(100 * time.Millisecond): // pacing of the retries
			}
		}
		rounds.Add(1)
	}
	return nil
}

// unfinished counts the records not yet published (pending, leased or
// dead), through the operator contract: what an operator would see.
func unfinished(s chaosStore) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := s.Stats(ctx)
	return st.Pending + st.Dead, err
}

func TestChaos(t *testing.T) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) { runChaos(t, tg) })
	}
}

func runChaos(t *testing.T, tg *target) {
	d := tg.newDatabase(t)
	store, err := tg.newStore(d.db)
	require.NoError(t, err)
	require.NoError(t, store.Migrate(context.Background()))
	r := &rig{t: t, target: tg, db: d, dir: t.TempDir(), rng: rand.New(rand.NewPCG(1, 2)), kills: map[int]int64{}}
	t.Cleanup(func() { // never leave a worker behind
		for _, p := range r.procs {
			if p != nil {
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
	})
	began := time.Now()
	for i := range workers {
		r.spawn(i)
	}
	produced := make(chan error, 1)
	produceCtx, stopProducing := context.WithDeadline(context.Background(), began.Add(deadline))
	t.Cleanup(stopProducing)
	var rounds atomic.Int64
	go func() { produced <- produce(produceCtx, store, d.db, &rounds) }()

	// Faults until every event is published.
	nextKill := time.Now().Add(time.Duration(1500+r.rng.IntN(2000)) * time.Millisecond)
	nextConnKill := time.Now().Add(time.Duration(300+r.rng.IntN(500)) * time.Millisecond)
	restarted, producerDone := false, false
	for {
		require.True(t, time.Now().Before(began.Add(deadline)), "not done within %v", deadline)
		select {
		case err := <-produced:
			require.NoError(t, err)
			producerDone = true
		default:
		}
		left, err := unfinished(store)
		if err == nil && producerDone && left == 0 {
			break
		}
		published := int(rounds.Load())*keys - left
		now := time.Now()
		switch {
		case !restarted && err == nil && published >= keys*perKey*3/10:
			restarted = true
			r.restartDB()
		case now.After(nextKill):
			r.killOne()
			nextKill = time.Now().Add(time.Duration(1500+r.rng.IntN(2000)) * time.Millisecond)
		case now.After(nextConnKill):
			n, _ := d.killConnections(context.Background())
			r.connKills += n
			nextConnKill = now.Add(time.Duration(300+r.rng.IntN(500)) * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.True(t, restarted, "the database restart happened")
	faultsOver := time.Since(began)

	// No fault any more: nothing may stay pending or leased.
	outboxtest.EventuallyWithin(t, 2*time.Minute, "no record pending or leased", func() bool {
		n, err := unfinished(store)
		return err == nil && n == 0
	})
	for i, p := range r.procs {
		// A worker started by the last kill may not handle SIGTERM yet.
		outboxtest.EventuallyWithin(t, 30*time.Second, fmt.Sprintf("worker %d to handle SIGTERM", i), func() bool {
			_, err := os.Stat(readyFile(p.log))
			return err == nil
		})
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for i, p := range r.procs {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("worker %d did not stop on SIGTERM", i)
		}
		require.Equal(t, 0, p.cmd.ProcessState.ExitCode(), "worker %d: a clean stop", i)
	}

	logs := readLogs(t, r.dir)
	report := verify(t, logs, r.kills)
	t.Logf("chaos figures on %s (%s): %d events over %d keys delivered in %v (faults for %v)", tg.name, d.server, keys*perKey, keys, time.Since(began).Round(time.Second), faultsOver.Round(time.Second))
	t.Logf("  faults: %d worker SIGKILLs (%d worker processes in all), %d connections killed, 1 database restart (down %v), %d injected sink failures, %d hangs past the publish timeout",
		len(r.kills), r.spawns, r.connKills, r.dbDownTime.Round(100*time.Millisecond), logs.failures, logs.hangs)
	t.Logf("  outcome: %d deliveries, %d duplicates (%d after a SIGKILL, %d after a failed settle, %d after a lost lease), 0 lost, per-key order held for all %d keys",
		report.deliveries, report.duplicates, report.byKill, report.bySettleFailure, report.byLostLease, keys)
}
