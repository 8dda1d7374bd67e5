package svckit

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// NewEventID returns a UUIDv7 (RFC 9562): 48 bits of Unix milliseconds,
// then 74 random bits. Time-ordered, and unique across instances without
// coordination.
func NewEventID(now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[6:])
	ms := uint64(now.UnixMilli())
	binary.BigEndian.PutUint16(b[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(b[2:6], uint32(ms))
	b[6] = 0x70 | b[6]&0x0f // version 7
	b[8] = 0x80 | b[8]&0x3f // variant 10
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
