package benchkit

// Rows is what ScanClaimed reads of a query's result: *sql.Rows and
// pgx.Rows both have it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Claim is the claim and the mark of the minimal ceiling's one
// transaction, whatever the driver, in a transaction the caller began
// and commits: query runs the locking SELECT of (id, event_id, payload),
// whose rows Claim reads as a relay would (ScanClaimed) and closes, and
// mark marks the ids read published. It returns how many rows it
// claimed: 0, without calling mark, when none was due.
func Claim(query func() (Rows, error), mark func(ids []int64) error) (int, error) {
	rows, err := query()
	if err != nil {
		return 0, err
	}
	ids, err := ScanClaimed(rows)
	closeRows(rows)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return len(ids), mark(ids)
}

// closeRows closes rows, whose Close returns an error (*sql.Rows, which
// reports through Err what matters here) or nothing (pgx.Rows).
func closeRows(rows Rows) {
	switch r := rows.(type) {
	case interface{ Close() error }:
		_ = r.Close()
	case interface{ Close() }:
		r.Close()
	}
}

// ScanClaimed reads the rows (id, event_id, payload) of the minimal
// ceiling's locking SELECT, every column as a relay would read it, and
// returns their ids. The caller closes rows.
func ScanClaimed(rows Rows) ([]int64, error) {
	var ids []int64
	for rows.Next() {
		var (
			id      int64
			eventID string
			payload []byte
		)
		if err := rows.Scan(&id, &eventID, &payload); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Drain runs workers goroutines, the i-th calling batch(i) until it
// takes no row or fails, and returns the first error (nil when every
// worker ran out of rows).
func Drain(workers int, batch func(worker int) (int, error)) error {
	errs := make(chan error, workers)
	for i := range workers {
		go func() {
			for {
				got, err := batch(i)
				if err != nil || got == 0 {
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
