package benchkit

import (
	"fmt"
	"sync"
	"time"
)

// Writers is how many writers Pace runs.
const Writers = 8

// Pace commits events from Writers writers at rate events per second in
// all, for d, and returns how many write committed, how long that took
// and the error that stopped a writer, if any.
//
// write commits the event id (lat-WRITER-I), the i-th of its writer, in a
// transaction of its own, and does what follows the commit; a writer
// stops at its first error. Each writer keeps a schedule, catching up
// after a slow commit rather than dropping the events it fell behind on
// (as a ticker would), so that the rate achieved says whether the
// writers kept up. The writers are not staggered: every interval, all
// commit at once, the harder case.
func Pace(rate int, d time.Duration, write func(id string, i int) error) (sent int, elapsed time.Duration, err error) {
	total := int(float64(rate) * d.Seconds())
	interval := time.Duration(float64(time.Second) * Writers / float64(rate))
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	start := time.Now()
	for wr := range Writers {
		wg.Go(func() {
			for i := 0; i < total/Writers; i++ {
				time.Sleep(time.Until(start.Add(time.Duration(i) * interval))) // pacing, not synchronisation
				if werr := write(fmt.Sprintf("lat-%d-%d", wr, i), i); werr != nil {
					mu.Lock()
					err = werr
					mu.Unlock()
					return
				}
				mu.Lock()
				sent++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return sent, time.Since(start), err
}

// KeptRate says whether writers that committed at got events per second
// kept their rate: within 5% of it. A latency taken while they fell
// behind measures a lighter load.
func KeptRate(got float64, rate int) string {
	if got < 0.95*float64(rate) {
		return fmt.Sprintf("writers did NOT keep their rate (%.0f of %d/s)", got, rate)
	}
	return "writers kept their rate"
}
