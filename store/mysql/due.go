package mysql

import (
	"context"
	"database/sql"
	"time"
)

// A claim of due records resumes its scan of idx_due where the channel's
// last claim stopped, instead of starting at the first due entry.
//
// Why: a published outcome moves its record in idx_due (status changes),
// and InnoDB keeps the old entry, delete-marked, until purge removes it.
// While a backlog drains, purge lags behind, so a scan from the start
// steps over the entries of every record published since purge last
// caught up; a claim of 100 records then steps over hundreds or thousands
// of entries. Resuming after the
// last claimed record skips them.
//
// (A claim no longer steps over the records other claims hold: a lease
// moves its record to the lease's end in idx_due, past the due range; see
// leaseSQL. What is left to skip is the entries the leases and outcomes
// leave behind, delete-marked, until purge removes them.)
//
// What it could skip, and how that is found: a record that is due but
// lies before the cursor. That is a record whose lease ran out while the
// cursor was past its lease's end, one a claim skipped while another
// transaction held it (SKIP LOCKED), one a retry or a release made due
// before the cursor, or one a writer inserted before the cursor's record
// but committed after the cursor passed it. So:
//   - a claim that finds fewer records after the cursor than it asked for
//     scans the part before the cursor in the same transaction, and the
//     next claim starts from the beginning;
//   - a claim starts from the beginning when the scan it continues began
//     more than fullScanEvery ago, so that a backlog that never runs
//     short delays such a record by at most that long.
//
// The cursor is one per channel and process, shared by every claimer of
// the channel in the process: claimers that take turns also skip what
// the others have just leased. It is a hint: any position is safe, since
// what it skips is found as above.
type duePos struct {
	next time.Time // next_attempt_at
	seq  uint64    // {seq}, the tie-breaker
}

type dueCursor struct {
	at    duePos
	since time.Time // when the scan it continues started at the beginning; zero: no cursor
}

// fullScanEvery is how long a claim may resume a scan before one starts
// from the beginning again.
const fullScanEvery = time.Second

// lockDue locks up to limit due pending records in due order, skipping
// those other claims hold, resuming the channel's last scan when it can.
func (s *channel) lockDue(ctx context.Context, tx *sql.Tx, budget *byteBudget, limit int) ([]scannedRecord, error) {
	now := s.clock()
	s.cursorMu.Lock()
	cur := s.dueCursor
	s.cursorMu.Unlock()

	if cur.since.IsZero() || now.Sub(cur.since) >= fullScanEvery {
		rows, last, err := readDue(ctx, tx, budget, claimDueSQL(s.t, limit))
		if err != nil {
			return nil, err
		}
		s.setDueCursor(len(rows) == limit, last, now)
		return rows, nil
	}
	rows, last, err := readDue(ctx, tx, budget, claimDueAfterSQL(s.t, cur.at, limit))
	if err != nil {
		return nil, err
	}
	if len(rows) == limit {
		s.setDueCursor(true, last, cur.since)
		return rows, nil
	}
	before, _, err := readDue(ctx, tx, budget, claimDueBeforeSQL(s.t, cur.at, limit-len(rows)))
	if err != nil {
		return nil, err
	}
	s.setDueCursor(false, duePos{}, time.Time{})
	return append(before, rows...), nil
}

// readDue runs one of the claim statements of due records and returns
// the records and the place in idx_due of the last one.
func readDue(ctx context.Context, tx *sql.Tx, budget *byteBudget, st statement) ([]scannedRecord, duePos, error) {
	var (
		next dbTime
		last duePos
	)
	rows, err := readRowsThen(ctx, tx, budget, st, []any{&next}, func() { last.next = next.t })
	if len(rows) > 0 {
		last.seq = rows[len(rows)-1].seq
	}
	return rows, last, err
}

// setDueCursor records where a scan that started at since stopped: at
// last, when the scan found all the records it asked for; otherwise the
// next claim starts from the beginning.
func (s *channel) setDueCursor(full bool, last duePos, since time.Time) {
	next := dueCursor{}
	if full {
		next = dueCursor{at: last, since: since}
	}
	s.cursorMu.Lock()
	s.dueCursor = next
	s.cursorMu.Unlock()
}

// clock is the channel's clock for the cursor's age (tests set now).
func (s *channel) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}
