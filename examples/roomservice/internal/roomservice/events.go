package roomservice

import (
	"encoding/json"
	"time"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// Room event types (the seed's event_type values).
const (
	RoomCreated     = "RoomCreated"
	RoomUserJoined  = "RoomUserJoined"
	RoomUserLeft    = "RoomUserLeft"
	RoomGiftSent    = "RoomGiftSent"
	RoomHeatChanged = "RoomHeatChanged"
	RoomRankChanged = "RoomRankChanged"
)

// noIMTypes need no Tencent IM message: the sink returns nil for them and
// they end published (the seed's "no-op success").
var noIMTypes = []string{RoomCreated, RoomHeatChanged, RoomRankChanged}

// Envelope is an event as clients receive it (the custom element's Data).
// Clients deduplicate by EventID: delivery is at-least-once.
type Envelope struct {
	EventID      string `json:"event_id"`
	EventType    string `json:"event_type"`
	RoomID       string `json:"room_id"`
	CommandID    string `json:"command_id"`
	RequestID    string `json:"request_id,omitempty"`
	Version      int64  `json:"version"` // the room's version after the command
	OccurredAtMs int64  `json:"occurred_at_ms"`
	Data         any    `json:"data"`
}

// message is the adapter from a room event to the outbox: the event ID is
// the message ID, the room is the key (and the IM group).
func (e Envelope) message(headers map[string]string) (outbox.Message, error) {
	payload, err := json.Marshal(e)
	if err != nil {
		return outbox.Message{}, err
	}
	return outbox.Message{
		ID:        e.EventID,
		Key:       e.RoomID,
		Type:      e.EventType,
		Payload:   payload,
		Headers:   headers,
		CreatedAt: time.UnixMilli(e.OccurredAtMs),
	}, nil
}

// newEventID returns a UUIDv7 (svckit.NewEventID): time-ordered, and
// unique across instances without coordination.
func newEventID(now time.Time) string { return svckit.NewEventID(now) }
