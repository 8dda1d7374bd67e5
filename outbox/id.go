package outbox

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"
)

// NewID returns a new message ID: a UUIDv7 (RFC 9562) in its usual
// 36-character form, 48 bits of Unix milliseconds, a 12-bit counter and
// 62 random bits. IDs one process makes sort in the order it made them
// (within a millisecond too: the counter, RFC 9562's method 1), IDs of
// different processes by millisecond, and they are unique without
// coordination, so consumers can deduplicate by them. Writer fills in
// empty IDs with it.
func NewID() string { return newIDAt(time.Now()) }

// lastID is the time and counter of the last ID made.
var lastID struct {
	sync.Mutex
	ms  uint64
	seq uint16
}

func newIDAt(now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on the supported platforms
	ms := uint64(now.UnixMilli())
	lastID.Lock()
	switch {
	case ms > lastID.ms:
		lastID.ms, lastID.seq = ms, binary.BigEndian.Uint16(b[6:8])&0x7ff // leaves room to count up
	case lastID.seq < 0xfff:
		lastID.seq++
	default: // 4096 in one millisecond: borrow the next one
		lastID.ms, lastID.seq = lastID.ms+1, 0
	}
	ms, seq := lastID.ms, lastID.seq
	lastID.Unlock()
	binary.BigEndian.PutUint16(b[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(b[2:6], uint32(ms))
	binary.BigEndian.PutUint16(b[6:8], 0x7000|seq) // version 7, then the counter
	b[8] = 0x80 | b[8]&0x3f                        // variant 10
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
