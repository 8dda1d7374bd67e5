package tencentim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/internal/safetext"
	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// REST APIs the sink calls.
const (
	APISendGroupMsg                = "group_open_http_svc/send_group_msg"
	APISendGroupSystemNotification = "group_open_http_svc/send_group_system_notification"
)

// Sink is an outbox.Sink that tells a Tencent Cloud IM group about each
// message. It is safe for concurrent use. Sink and *Sink print, log and
// marshal without the secret key or the UserSig (see String).
type Sink struct {
	cfg     Config // without SecretKey, which only signer holds
	skip    map[string]bool
	client  *http.Client
	signer  *signer
	limiter *limiter
	own     bool // client is the sink's own (Config.HTTPClient was nil)
}

var _ outbox.Sink = (*Sink)(nil)

// New returns a sink for cfg, or an error naming each missing or malformed
// field.
func New(cfg Config) (*Sink, error) {
	own := cfg.HTTPClient == nil
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Sink{
		skip:    make(map[string]bool, len(cfg.SkipTypes)),
		client:  cfg.HTTPClient,
		own:     own,
		signer:  newSigner(cfg),
		limiter: newLimiter(cfg),
	}
	// The key lives in the signer only, out of reach of a printout of
	// the sink's fields.
	cfg.SecretKey = ""
	s.cfg = cfg
	for _, t := range cfg.SkipTypes {
		s.skip[t] = true
	}
	return s, nil
}

// Close closes the idle connections of the sink's own HTTP client (not
// of a Config.HTTPClient, which is the caller's to close). Publish may
// still be called after it, and opens new ones.
func (s *Sink) Close() error {
	if s.own {
		s.client.CloseIdleConnections()
	}
	return nil
}

// Publish sends msg to its group, waiting for the rate limiter first. It
// returns nil at once for a type in SkipTypes. Errors that can never
// succeed (no group, a payload too large or not UTF-8 text, and the
// permanent ErrorCodes) are marked with outbox.Permanent, those of the
// app's configuration with outbox.Unavailable; the rest are retryable.
// ctx bounds the whole call.
func (s *Sink) Publish(ctx context.Context, msg outbox.Message) error {
	if s.skip[msg.Type] {
		return nil
	}
	group, err := s.cfg.GroupID(msg)
	if err != nil {
		return outbox.Permanent(fmt.Errorf("tencentim: group ID mapping failed: %w (message %q)", err, msg.ID))
	}
	if group == "" {
		return outbox.Permanent(fmt.Errorf("%w (message %q, type %q)", ErrNoGroup, msg.ID, msg.Type))
	}
	api, body, err := s.encode(msg, group)
	if err != nil {
		return outbox.Permanent(err)
	}
	if err := s.limiter.wait(ctx, group); err != nil {
		text := safetext.Truncate(s.scrub(err.Error(), ""), maxInfoBytes)
		return &Error{API: api, Info: "waiting for the rate limiter: " + text, Err: secretfmt.Cause(text, err)}
	}
	trace := msg.Headers[outbox.HeaderTraceParent]
	if !outbox.ValidTraceParent(trace) {
		trace = ""
	}
	return s.call(ctx, api, body, trace)
}

// call makes the request, passing on the message's W3C traceparent; when
// Tencent no longer accepts the UserSig it signs a new one and repeats the
// request once.
func (s *Sink) call(ctx context.Context, api string, body []byte, trace string) error {
	sig, err := s.signer.get()
	if err != nil {
		return err
	}
	err = s.do(ctx, api, sig, body, trace)
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Code == 0 {
		return err
	}
	if c, _ := classify(apiErr.Code); c != resign {
		return err
	}
	if sig, err = s.signer.renew(sig); err != nil {
		return err
	}
	return s.do(ctx, api, sig, body, trace)
}

// Request bodies, as Tencent's REST API documents them.
type (
	groupMsgRequest struct {
		GroupID     string       `json:"GroupId"`
		Random      uint32       `json:"Random"`
		MsgPriority string       `json:"MsgPriority,omitempty"`
		MsgBody     []customElem `json:"MsgBody"`
	}
	customElem struct {
		MsgType    string        `json:"MsgType"`
		MsgContent customContent `json:"MsgContent"`
	}
	customContent struct {
		Data string `json:"Data"`
		Desc string `json:"Desc,omitempty"`
		Ext  string `json:"Ext,omitempty"`
	}
	notificationRequest struct {
		GroupID string `json:"GroupId"`
		Content string `json:"Content"`
	}
	// elemExt is the custom element's Ext: enough for a client to
	// deduplicate and route without parsing Data.
	elemExt struct {
		EventID   string `json:"event_id"`
		EventType string `json:"event_type"`
	}
)

// encode builds the request body for msg and checks its size.
func (s *Sink) encode(msg outbox.Message, group string) (api string, body []byte, err error) {
	if !utf8.Valid(msg.Payload) {
		return "", nil, fmt.Errorf("tencentim: payload is not UTF-8 text, which IM messages must be (message %q)", msg.ID)
	}
	var size int
	var req any
	if s.cfg.Mode == ModeSystemNotification {
		api, size = APISendGroupSystemNotification, len(msg.Payload)
		req = notificationRequest{GroupID: group, Content: string(msg.Payload)}
	} else {
		ext, _ := json.Marshal(elemExt{EventID: msg.ID, EventType: msg.Type})
		elems := []customElem{{MsgType: "TIMCustomElem", MsgContent: customContent{Data: string(msg.Payload), Ext: string(ext)}}}
		encoded, err := json.Marshal(elems)
		if err != nil {
			return "", nil, fmt.Errorf("tencentim: cannot encode the message: %w (message %q)", err, msg.ID)
		}
		api, size = APISendGroupMsg, len(encoded)
		req = groupMsgRequest{GroupID: group, Random: RandomFor(msg.ID), MsgPriority: s.cfg.Priority, MsgBody: elems}
	}
	if size > s.cfg.MaxMessageBytes {
		return api, nil, fmt.Errorf("%w: body of %d bytes exceeds MaxMessageBytes %d (message %q)",
			ErrMessageTooLarge, size, s.cfg.MaxMessageBytes, msg.ID)
	}
	body, err = json.Marshal(req)
	if err != nil {
		return api, nil, fmt.Errorf("tencentim: cannot encode the request: %w (message %q)", err, msg.ID)
	}
	return api, body, nil
}

// RandomFor is the Random sent with a message: the 32-bit FNV-1a hash of
// its event ID. Tencent discards a message whose Random repeats one sent
// to the group within five minutes, so a quick redelivery of the same
// event is dropped upstream; two different events of one group collide
// with probability about n²/2³³ for n events in five minutes.
func RandomFor(eventID string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(eventID))
	return h.Sum32()
}
