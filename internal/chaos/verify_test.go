//go:build chaos

package chaos

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// delivery is one accepted publish of an event.
type delivery struct {
	at  int64
	pid int
}

// claim is one claimed batch of a worker: at is when it was logged,
// after the call returned; began when the call began, before its lease
// started.
type claim struct {
	at, began int64
	pid       int
	token     string
	ids       map[string]bool
}

// settle is one settle call of a worker.
type settle struct {
	at int64
	ok bool
}

type workerLogs struct {
	deliveries map[string][]delivery
	claims     map[int][]claim   // by pid, in time order
	settles    map[string]settle // by token
	failures   int
	hangs      int
}

// readLogs parses every worker log in dir.
func readLogs(t *testing.T, dir string) workerLogs {
	logs := workerLogs{deliveries: map[string][]delivery{}, claims: map[int][]claim{}, settles: map[string]settle{}}
	files, err := filepath.Glob(filepath.Join(dir, "worker-*.log"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, name := range files {
		f, err := os.Open(name)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			require.GreaterOrEqual(t, len(fields), 4, "line %q of %s", sc.Text(), name)
			pid, _ := strconv.Atoi(fields[1])
			at, _ := strconv.ParseInt(fields[2], 10, 64)
			switch fields[0] {
			case "D":
				logs.deliveries[fields[3]] = append(logs.deliveries[fields[3]], delivery{at: at, pid: pid})
			case "F":
				logs.failures++
			case "H":
				logs.hangs++
			case "C":
				began, err := strconv.ParseInt(fields[4], 10, 64)
				require.NoError(t, err, "line %q of %s", sc.Text(), name)
				c := claim{at: at, began: began, pid: pid, token: fields[3], ids: map[string]bool{}}
				for _, id := range fields[5:] {
					require.False(t, c.ids[id], "claim %s holds %s twice", c.token, id)
					c.ids[id] = true
				}
				logs.claims[pid] = append(logs.claims[pid], c)
			case "S":
				logs.settles[fields[3]] = settle{at: at, ok: fields[4] == "ok"}
			}
		}
		require.NoError(t, sc.Err())
		f.Close()
	}
	return logs
}

// claimOf finds the claim a delivery came from: the worker's latest claim
// of the event before it.
func (l workerLogs) claimOf(t *testing.T, id string, d delivery) claim {
	cs := l.claims[d.pid]
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].at <= d.at && cs[i].ids[id] {
			return cs[i]
		}
	}
	t.Fatalf("delivery of %s by pid %d at %d has no claim", id, d.pid, d.at)
	return claim{}
}

type report struct {
	deliveries, duplicates               int
	byKill, bySettleFailure, byLostLease int
}

// verify checks what the chaos suite promises and explains every
// duplicate: a later delivery of an event must come from a later claim,
// after the earlier claim's outcome was not recorded (its worker was
// killed before settling, or its settle failed) or its lease had expired.
func verify(t *testing.T, logs workerLogs, kills map[int]int64) report {
	var rep report
	for k := range keys {
		var prev int64
		for seq := range perKey {
			id := eventID(k, seq)
			ds := logs.deliveries[id]
			require.NotEmpty(t, ds, "event %s was never delivered", id)
			slices.SortFunc(ds, func(a, b delivery) int { return int(a.at - b.at) })
			require.Greater(t, ds[0].at, prev, "event %s was delivered before its predecessor", id)
			prev = ds[0].at
			rep.deliveries += len(ds)
			for i := 1; i < len(ds); i++ {
				rep.duplicates++
				first, again := logs.claimOf(t, id, ds[i-1]), logs.claimOf(t, id, ds[i])
				require.NotEqual(t, first.token, again.token, "%s delivered twice from one claim", id)
				switch s, settled := logs.settles[first.token]; {
				case settled && !s.ok:
					rep.bySettleFailure++
				case !settled && kills[first.pid] > ds[i-1].at:
					rep.byKill++
				case time.Duration(again.at-first.began) >= leaseTimeout-time.Microsecond:
					// Re-claimed only once the first lease had run out:
					// that lease began after first.began and the
					// re-claim returned before again.at, both on this
					// machine's clock (the server's, in microseconds).
					// No allowance for how long a call or the log
					// write took, which a loaded machine could exceed.
					rep.byLostLease++
				default:
					t.Errorf("duplicate of %s: claim %s (pid %d, settled=%v) was re-claimed %v after it began, by %s; unexplained",
						id, first.token, first.pid, settled, time.Duration(again.at-first.began), again.token)
				}
			}
		}
	}
	return rep
}
