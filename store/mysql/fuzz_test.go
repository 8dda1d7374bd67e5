package mysql

import (
	"database/sql"
	"maps"
	"testing"
)

// FuzzStoredHeaders: whatever sits in the headers column decodes or fails
// with an error, never a panic; what decodes re-encodes to the same map.
func FuzzStoredHeaders(f *testing.F) {
	for _, s := range []string{"", "{}", `{"request_id":"r-1","traceparent":"00-abc-def-01"}`, "{broken", `{"a":1}`, `["a"]`, "null", `{"a":"\u0000"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stored string) {
		h, err := decodeHeaders(sql.NullString{String: stored, Valid: true})
		if err != nil {
			return
		}
		again, err := encodeHeaders(h)
		if err != nil {
			t.Fatalf("decoded headers do not encode: %v", err)
		}
		var back map[string]string
		if s, ok := again.(string); ok {
			if back, err = decodeHeaders(sql.NullString{String: s, Valid: true}); err != nil {
				t.Fatalf("re-encoded headers do not decode: %v", err)
			}
		}
		if len(h) > 0 && !maps.Equal(h, back) {
			t.Fatalf("round trip changed %v into %v", h, back)
		}
	})
}
