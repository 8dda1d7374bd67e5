package benchkit

// Rows is what ScanClaimed reads of a query's result: *sql.Rows and
// pgx.Rows both have it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
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
