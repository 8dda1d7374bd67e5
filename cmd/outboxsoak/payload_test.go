package main

import (
	"testing"
	"time"
)

func TestPayloadRoundTrip(t *testing.T) {
	at := time.Unix(1767312000, 123456789)
	p, err := decodePayload(encodePayload(42, 1234567, at))
	if err != nil {
		t.Fatal(err)
	}
	if p.Room != 42 || p.Seq != 1234567 || p.WrittenNs != at.UnixNano() {
		t.Errorf("decoded %+v", p)
	}
	for _, bad := range []string{``, `{}`, `{"room":1}`, `{"room":1,"seq":0,"written_unix_ns":5}`, `not json`} {
		if _, err := decodePayload([]byte(bad)); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}
