package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// eventPayload is what every event carries, so that the receiver can
// check it without asking the database: its room, its place in the room
// (from 1, in commit order) and when its transaction wrote it (just
// before the commit: lags count from there).
type eventPayload struct {
	Room      int   `json:"room"`
	Seq       int64 `json:"seq"`
	WrittenNs int64 `json:"written_unix_ns"`
}

// encodePayload returns the payload of room's event at place seq.
func encodePayload(room int, seq int64, written time.Time) []byte {
	b := make([]byte, 0, 80)
	b = append(b, `{"room":`...)
	b = strconv.AppendInt(b, int64(room), 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"written_unix_ns":`...)
	b = strconv.AppendInt(b, written.UnixNano(), 10)
	return append(b, '}')
}

// decodePayload parses a payload encodePayload wrote.
func decodePayload(b []byte) (eventPayload, error) {
	var p eventPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("payload: %w", err)
	}
	if p.Seq < 1 || p.WrittenNs == 0 {
		return p, fmt.Errorf("payload %.80q: no seq or written_unix_ns", b)
	}
	return p, nil
}
