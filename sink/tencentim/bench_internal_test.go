package tencentim

import (
	"testing"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// BenchmarkEncode is the sink's own work per event, without the network:
// the request body of one message to its group.
func BenchmarkEncode(b *testing.B) {
	s, err := New(Config{BaseURL: "http://127.0.0.1:1", SDKAppID: 1400000001, SecretKey: "k", AdminIdentifier: "administrator"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m := outbox.Message{ID: "e-1", Key: "room-1", Type: "RoomGiftSent", Payload: []byte(`{"event_id":"e-1","room_id":"room-1","gift":"rose","count":1}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.encode(m, "room-1"); err != nil {
			b.Fatal(err)
		}
	}
}
