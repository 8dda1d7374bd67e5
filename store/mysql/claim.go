package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// Claim leases up to p.Limit due pending records (or the pending records
// named by p.IDs) for p.LeaseFor, skipping records other claims hold.
//
// It runs one short READ COMMITTED transaction: SELECT … FOR UPDATE SKIP
// LOCKED over the due range of idx_due, then an UPDATE that stamps the
// lease (a fresh random token, the owner, and next_attempt_at moved to
// the lease's end), then COMMIT, before the caller publishes anything.
// READ COMMITTED takes no gap locks, so a claim never blocks a writer's
// Enqueue. Records are returned in due order (p.IDs: in insert order).
func (s *Store) Claim(ctx context.Context, p outbox.ClaimParams) (outbox.Batch, error) {
	if err := validateClaim(p); err != nil {
		return outbox.Batch{}, err
	}
	token, err := newToken()
	if err != nil {
		return outbox.Batch{}, fmt.Errorf("mysql store: claim: lease token: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, claimTxOptions)
	if err != nil {
		return outbox.Batch{}, s.wrap("claim", err)
	}
	defer func() { _ = tx.Rollback() }()

	batch, seqs, err := s.selectClaimable(ctx, tx, p)
	if err != nil || len(seqs) == 0 {
		return outbox.Batch{}, err
	}
	args := append([]any{token, p.Owner, p.LeaseFor.Microseconds()}, seqs...)
	if _, err := tx.ExecContext(ctx, s.q.leasePrefix+placeholders(len(seqs))+")", args...); err != nil {
		return outbox.Batch{}, s.wrap("claim", err)
	}
	if err := tx.Commit(); err != nil {
		return outbox.Batch{}, s.wrap("claim", err)
	}
	batch.Token = token
	return batch, nil
}

// claimTxOptions: READ COMMITTED, because under REPEATABLE READ the
// claim's range scan would take next-key (gap) locks, and a writer
// inserting a new due record into that gap would wait for the claim to
// commit (TestClaimDoesNotBlockWriters).
var claimTxOptions = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// selectClaimable locks the claimable rows and decodes them. seqs are their
// ids, for the lease update.
func (s *Store) selectClaimable(ctx context.Context, tx *sql.Tx, p outbox.ClaimParams) (outbox.Batch, []any, error) {
	query, args := s.q.claimDue, []any{p.Limit}
	if len(p.IDs) > 0 {
		query = s.q.claimIDsPrefix + placeholders(len(p.IDs)) + s.q.claimIDsSuffix
		args = make([]any, 0, len(p.IDs)+1)
		for _, id := range p.IDs {
			args = append(args, id)
		}
		args = append(args, p.Limit)
	}
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return outbox.Batch{}, nil, s.wrap("claim", err)
	}
	defer rows.Close()
	var (
		batch outbox.Batch
		seqs  []any
	)
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return outbox.Batch{}, nil, s.wrap("claim", err)
		}
		seqs = append(seqs, r.seq)
		if r.decodeErr != nil {
			batch.Invalid = append(batch.Invalid, outbox.InvalidRecord{Record: r.rec, Err: r.decodeErr})
			continue
		}
		batch.Records = append(batch.Records, r.rec)
	}
	if err := rows.Err(); err != nil {
		return outbox.Batch{}, nil, s.wrap("claim", err)
	}
	return batch, seqs, nil
}

func validateClaim(p outbox.ClaimParams) error {
	var errs []error
	if p.Owner == "" || utf8.RuneCountInString(p.Owner) > outbox.MaxNodeIDLength {
		errs = append(errs, fmt.Errorf("mysql store: claim: Owner %q: must be 1 to %d characters", p.Owner, outbox.MaxNodeIDLength))
	}
	if p.Limit < 1 || p.Limit > outbox.MaxBatchSize {
		errs = append(errs, fmt.Errorf("mysql store: claim: Limit %d: must be 1 to %d", p.Limit, outbox.MaxBatchSize))
	}
	if p.LeaseFor.Microseconds() < 1 {
		errs = append(errs, fmt.Errorf("mysql store: claim: LeaseFor %v: must be at least 1µs", p.LeaseFor))
	}
	if len(p.IDs) > p.Limit {
		errs = append(errs, fmt.Errorf("mysql store: claim: %d IDs: more than Limit %d", len(p.IDs), p.Limit))
	}
	return errors.Join(errs...)
}

// newToken returns a random lease token: 32 hex digits.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
