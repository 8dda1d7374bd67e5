package activityservice

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxrelay/outboxrelay/sink/natsjs"
)

// room-service's event types (its events.go; the contract between the
// two services is the JSON, not a Go package).
const (
	RoomCreated     = "RoomCreated"
	RoomUserJoined  = "RoomUserJoined"
	RoomUserLeft    = "RoomUserLeft"
	RoomGiftSent    = "RoomGiftSent"
	RoomHeatChanged = "RoomHeatChanged"
	RoomRankChanged = "RoomRankChanged"
)

// ignoredTypes are room events activity-service knows and has no use
// for: acknowledged and counted, never recorded.
var ignoredTypes = map[string]bool{RoomHeatChanged: true, RoomRankChanged: true}

// envelope is room-service's event as it travels: the JSON of its
// Envelope. Fields activity-service does not read are left out; fields
// it does not know are ignored, so that room-service can add some.
type envelope struct {
	EventID      string          `json:"event_id"`
	EventType    string          `json:"event_type"`
	RoomID       string          `json:"room_id"`
	OccurredAtMs int64           `json:"occurred_at_ms"`
	Data         json.RawMessage `json:"data"`
}

// roomEvent is a room event activity-service applies, decoded and
// checked.
type roomEvent struct {
	ID     string // the outbox message ID (Nats-Msg-Id), the inbox key
	Type   string
	RoomID string
	// UserID is the owner (RoomCreated), the member (RoomUserJoined,
	// RoomUserLeft) or the sender (RoomGiftSent).
	UserID string
	// Count and Points are a gift's.
	Count  int64
	Points int64
}

// Errors of decode: errUnknownType and errIgnoredType are acknowledged
// and counted; errMalformed too, and logged, so that no message can
// loop forever.
var (
	errUnknownType = errors.New("unknown event type")
	errIgnoredType = errors.New("event type not used")
	errMalformed   = errors.New("malformed event")
)

// Bounds of the fields, those of activity-service's columns: a value
// that would not fit is malformed, never a failing transaction that
// JetStream would redeliver forever.
const (
	maxIDBytes     = 64
	maxEventIDLen  = 255
	maxGiftPoints  = math.MaxInt64 / 1024
	maxGiftCount   = math.MaxInt32
	maxPayloadSize = 1 << 20
)

// decode reads a message of room-service's stream: the event ID from
// Nats-Msg-Id (natsjs sets it to the outbox message ID), the type from
// Outbox-Event-Type, the rest from the JSON payload, which must agree
// with the headers.
func decode(h nats.Header, payload []byte) (roomEvent, error) {
	id, typ := h.Get(jetstream.MsgIDHeader), h.Get(natsjs.HeaderEventType)
	switch {
	case id == "" || len(id) > maxEventIDLen || !utf8.ValidString(id):
		return roomEvent{}, fmt.Errorf("%w: header %s missing or invalid", errMalformed, jetstream.MsgIDHeader)
	case typ == "":
		return roomEvent{}, fmt.Errorf("%w: header %s missing", errMalformed, natsjs.HeaderEventType)
	case ignoredTypes[typ]:
		return roomEvent{}, errIgnoredType
	case typ != RoomCreated && typ != RoomUserJoined && typ != RoomUserLeft && typ != RoomGiftSent:
		return roomEvent{}, fmt.Errorf("%w %q", errUnknownType, clip(typ))
	case len(payload) > maxPayloadSize:
		return roomEvent{}, fmt.Errorf("%w: payload of %d bytes", errMalformed, len(payload))
	}
	var env envelope
	if err := json.Unmarshal(payload, &env); err != nil {
		return roomEvent{}, fmt.Errorf("%w: payload: %v", errMalformed, err)
	}
	if env.EventID != id || env.EventType != typ {
		return roomEvent{}, fmt.Errorf("%w: payload's event_id %q and event_type %q do not match the headers", errMalformed, clip(env.EventID), clip(env.EventType))
	}
	ev := roomEvent{ID: id, Type: typ, RoomID: env.RoomID}
	var data struct {
		OwnerID *string `json:"owner_id"`
		UserID  *string `json:"user_id"`
		Count   *int64  `json:"count"`
		Points  *int64  `json:"points"`
	}
	if err := json.Unmarshal(env.Data, &data); err != nil {
		return roomEvent{}, fmt.Errorf("%w: data: %v", errMalformed, err)
	}
	user := data.UserID
	if typ == RoomCreated {
		user = data.OwnerID
	}
	if user != nil {
		ev.UserID = *user
	}
	if typ == RoomGiftSent {
		if data.Count == nil || data.Points == nil || *data.Count < 1 || *data.Count > maxGiftCount || *data.Points < 0 || *data.Points > maxGiftPoints {
			return roomEvent{}, fmt.Errorf("%w: gift count and points missing or out of range", errMalformed)
		}
		ev.Count, ev.Points = *data.Count, *data.Points
	}
	if !validKey(ev.RoomID) || !validKey(ev.UserID) {
		return roomEvent{}, fmt.Errorf("%w: room_id %q or user id %q empty, over %d bytes or not UTF-8", errMalformed, clip(ev.RoomID), clip(ev.UserID), maxIDBytes)
	}
	return ev, nil
}

func validKey(s string) bool { return s != "" && len(s) <= maxIDBytes && utf8.ValidString(s) }

// clip is s cut to 64 bytes, for an error text.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "…"
}
