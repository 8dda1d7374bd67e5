package benchkit

import (
	"slices"
	"testing"
)

type fakeRows struct {
	ids    []int64
	closed bool
}

func (r *fakeRows) Next() bool { return len(r.ids) > 0 }
func (r *fakeRows) Scan(dest ...any) error {
	*dest[0].(*int64), r.ids = r.ids[0], r.ids[1:]
	return nil
}
func (r *fakeRows) Err() error { return nil }
func (r *fakeRows) Close()     { r.closed = true }

func TestClaim(t *testing.T) {
	rows := &fakeRows{ids: []int64{4, 5}}
	var marked []int64
	got, err := Claim(func() (Rows, error) { return rows, nil }, func(ids []int64) error { marked = ids; return nil })
	if err != nil || got != 2 || !slices.Equal(marked, []int64{4, 5}) || !rows.closed {
		t.Errorf("Claim: %d, %v; marked %v; closed %v", got, err, marked, rows.closed)
	}
	none := &fakeRows{}
	got, err = Claim(func() (Rows, error) { return none, nil }, func([]int64) error { t.Error("mark called with no rows"); return nil })
	if err != nil || got != 0 || !none.closed {
		t.Errorf("Claim of no rows: %d, %v; closed %v", got, err, none.closed)
	}
}
