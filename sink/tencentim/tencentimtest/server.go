// Package tencentimtest is a local fake of the Tencent Cloud IM REST API
// calls that sink/tencentim makes, for tests and demos.
//
// It checks what the real service checks (sdkappid, identifier,
// contenttype, random, and the UserSig, verified with Tencent's official
// module), keeps the messages each group received in order, discards a
// repeated Random within five minutes as Tencent does, and can be
// scripted to fail: answer the next calls with an ErrorCode, with HTTP
// 502, with a malformed body, or not at all until the client gives up;
// or go down altogether (SetDown), as the sink suite's outage needs.
//
// Its memory is bounded, so that it can serve a long-running local
// setup: it keeps the last Config.MaxRecords requests and messages, and
// can leave the UserSig out of them (Config.ForgetUserSigs).
//
// The request and response shapes are declared here again rather than
// shared with the sink, so that a mistake in the sink's encoding shows up
// as a failed test instead of being agreed on by both sides.
package tencentimtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tencentyun/tls-sig-api-v2-golang/tencentyun"
)

// Config is the app the fake serves.
type Config struct {
	SDKAppID        int
	SecretKey       string
	AdminIdentifier string
	// MaxBodyBytes bounds a message body (MsgBody or Content); larger
	// ones are answered with 80002. Defaults to 12 KB.
	MaxBodyBytes int
	// MaxRecords bounds what the fake remembers: the last MaxRecords
	// calls (Requests), the last MaxRecords messages (AllMessages,
	// Messages) and the Randoms of the last MaxRecords messages, for the
	// five-minute dedupe. Older ones are forgotten, and a group none of
	// whose messages is kept may number its messages from 1 again.
	// Defaults to DefaultMaxRecords (1,000).
	MaxRecords int
	// ForgetUserSigs records calls and messages without their UserSig
	// (no "usersig" in Request.Query, an empty Message.UserSig), for a
	// fake that runs for long and whose records no one reads for
	// signatures. Unset (the default), the UserSig is kept with the last
	// MaxRecords records, for tests that check what a client sent.
	ForgetUserSigs bool
}

// The APIs the fake implements.
const (
	APISendGroupMsg                = "group_open_http_svc/send_group_msg"
	APISendGroupSystemNotification = "group_open_http_svc/send_group_system_notification"
)

// EchoUserSig, in the info of a scripted failure, is replaced by the
// UserSig of the request, as a careless upstream might echo it; tests use
// it to check that clients keep it out of their errors.
const EchoUserSig = "{usersig}"

// dedupeWindow is how long Tencent remembers a message's Random.
const dedupeWindow = 5 * time.Minute

// Message is a message a group received.
type Message struct {
	GroupID string
	// API is the API that delivered it.
	API string
	// Random, Priority and Elems are set for group messages.
	Random   uint32
	Priority string
	Elems    []Elem
	// Content is set for system notifications.
	Content string
	// Seq numbers a group's messages from 1.
	Seq uint64
	// UserSig is the signature the request carried; empty with
	// Config.ForgetUserSigs.
	UserSig string
}

// Elem is one element of a group message's MsgBody.
type Elem struct {
	Type string
	Data string
	Desc string
	Ext  string
}

// Request is what the fake saw of one call, and how it answered.
type Request struct {
	API string
	// Query is the query string; with Config.ForgetUserSigs, without
	// "usersig".
	Query map[string]string
	// TraceParent is the request's W3C traceparent header, if any.
	TraceParent string
	HTTPStatus  int
	ErrorCode   int
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	cfg    Config
	srv    *httptest.Server
	closed chan struct{}
	once   sync.Once

	mu        sync.Mutex
	now       func() time.Time
	faults    []fault
	removed   map[string]bool
	messages  *ring[Message]
	seq       map[string]uint64
	randoms   *randomWindow
	requests  *ring[Request]
	duplicate int
	inFlight  int
	// down is closed and replaced by SetDown(false): calls wait on it
	// while the fake is down; nil while it is up.
	down chan struct{}
}

type faultKind int

const (
	faultCode faultKind = iota + 1
	faultHTTP
	faultHang
	faultMalformed
)

type fault struct {
	kind   faultKind
	code   int
	status int
	info   string
	// echo, if set, makes the info from the request's UserSig.
	echo func(userSig string) string
}

// NewServer starts a fake for cfg. Close it when done.
func NewServer(cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 12 << 10
	}
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = DefaultMaxRecords
	}
	s := &Server{
		cfg: cfg, closed: make(chan struct{}), now: time.Now,
		removed: map[string]bool{}, seq: map[string]uint64{}, randoms: newRandomWindow(cfg.MaxRecords),
		messages: newRing[Message](cfg.MaxRecords), requests: newRing[Request](cfg.MaxRecords),
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	return s
}

// URL is the base URL to configure the sink with.
func (s *Server) URL() string { return s.srv.URL }

// Close releases hanging requests and stops the server.
func (s *Server) Close() {
	s.once.Do(func() { close(s.closed) })
	s.srv.Close()
}

// SetNow sets the clock that UserSigs and the Random window are judged by.
func (s *Server) SetNow(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// FailNext answers the next n calls with ErrorCode code (HTTP 200,
// ActionStatus FAIL) and ErrorInfo info.
func (s *Server) FailNext(n, code int, info string) {
	s.script(n, fault{kind: faultCode, code: code, info: info})
}

// FailNextWith answers the next n calls with ErrorCode code and the
// ErrorInfo that info makes from the request's UserSig: tests use it to
// echo the signature the way a careless upstream might (percent-encoded,
// in part, behind "UserSig=") and check that clients keep it out of
// their errors.
func (s *Server) FailNextWith(n, code int, info func(userSig string) string) {
	s.script(n, fault{kind: faultCode, code: code, echo: info})
}

// FailNextHTTP answers the next n calls with the HTTP status, as a proxy
// in front of the service might.
func (s *Server) FailNextHTTP(n, status int) { s.script(n, fault{kind: faultHTTP, status: status}) }

// SetDown takes the fake down (true) or brings it back (false). While it
// is down, every call is left unanswered until the client gives up: an
// endpoint that takes connections and never answers, the outage that
// tests a client's deadlines hardest. Bringing it back answers the calls
// still waiting with HTTP 503, unprocessed, and serves later calls as
// usual; what the fake held is kept.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case down && s.down == nil:
		s.down = make(chan struct{})
	case !down && s.down != nil:
		close(s.down)
		s.down = nil
	}
}

// HangNext leaves the next n calls unanswered until the client gives up
// (or the server closes).
func (s *Server) HangNext(n int) { s.script(n, fault{kind: faultHang}) }

// MalformNext answers the next n calls with HTTP 200 and an HTML body, as
// a misconfigured proxy might.
func (s *Server) MalformNext(n int) { s.script(n, fault{kind: faultMalformed}) }

func (s *Server) script(n int, f fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults = append(s.faults, f)
	}
}

// RemoveGroup makes the group unknown: later messages to it get 10010.
func (s *Server) RemoveGroup(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removed[id] = true
}

// Messages returns what the group received, in order: those of the
// last Config.MaxRecords messages that went to it.
func (s *Server) Messages(group string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	s.messages.each(func(m Message) {
		if m.GroupID == group {
			out = append(out, m)
		}
	})
	return out
}

// AllMessages returns the last Config.MaxRecords messages received, in
// order.
func (s *Server) AllMessages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.messages.all()
}

// Requests returns the last Config.MaxRecords calls seen, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests.all()
}

// Duplicates counts messages discarded because their Random repeated one
// sent to the group within five minutes.
func (s *Server) Duplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.duplicate
}

// answer is the response envelope.
type answer struct {
	ActionStatus string `json:"ActionStatus"`
	ErrorInfo    string `json:"ErrorInfo"`
	ErrorCode    int    `json:"ErrorCode"`
	MsgTime      int64  `json:"MsgTime,omitempty"`
	MsgSeq       uint64 `json:"MsgSeq,omitempty"`
}

// InFlight returns the number of calls being handled right now (a hanging
// call counts until the client gives up).
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.inFlight++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	api := strings.TrimPrefix(r.URL.Path, "/v4/")
	query := map[string]string{}
	for k := range r.URL.Query() {
		query[k] = r.URL.Query().Get(k)
	}
	rec := Request{API: api, Query: query, TraceParent: r.Header.Get("Traceparent"), HTTPStatus: http.StatusOK}
	defer func() {
		if s.cfg.ForgetUserSigs {
			rec.Query = maps.Clone(query)
			delete(rec.Query, "usersig")
		}
		s.mu.Lock()
		s.requests.push(rec)
		s.mu.Unlock()
	}()

	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down != nil {
		rec.HTTPStatus = 0
		select {
		case <-r.Context().Done():
		case <-s.closed:
		case <-down:
			rec.HTTPStatus = http.StatusServiceUnavailable
			http.Error(w, "the fake was down", http.StatusServiceUnavailable)
		}
		return
	}
	if f, ok := s.nextFault(); ok {
		switch f.kind {
		case faultHTTP:
			rec.HTTPStatus = f.status
			http.Error(w, http.StatusText(f.status), f.status)
		case faultHang:
			rec.HTTPStatus = 0
			select {
			case <-r.Context().Done():
			case <-s.closed:
			}
		case faultMalformed:
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html><body><h1>502 Bad Gateway</h1></body></html>"))
		case faultCode:
			rec.ErrorCode = f.code
			info := strings.ReplaceAll(f.info, EchoUserSig, query["usersig"])
			if f.echo != nil {
				info = f.echo(query["usersig"])
			}
			s.reply(w, answer{ActionStatus: "FAIL", ErrorCode: f.code, ErrorInfo: info})
		}
		return
	}
	if r.Method != http.MethodPost {
		rec.HTTPStatus = http.StatusMethodNotAllowed
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	a := s.check(api, query)
	if a.ErrorCode == 0 {
		a = s.deliver(api, query["usersig"], r)
	}
	rec.ErrorCode = a.ErrorCode
	s.reply(w, a)
}

func (s *Server) nextFault() (fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) == 0 {
		return fault{}, false
	}
	f := s.faults[0]
	s.faults = s.faults[1:]
	return f, true
}

func fail(code int, info string) answer {
	return answer{ActionStatus: "FAIL", ErrorCode: code, ErrorInfo: info}
}

// check validates the query string and the UserSig, as the real service
// does before it looks at the body.
func (s *Server) check(api string, q map[string]string) answer {
	if api != APISendGroupMsg && api != APISendGroupSystemNotification {
		return fail(60009, "invalid resource: "+api)
	}
	if q["contenttype"] != "json" {
		return fail(60002, "contenttype must be json")
	}
	if _, err := strconv.ParseUint(q["random"], 10, 32); err != nil {
		return fail(60002, "random must be a 32-bit unsigned integer")
	}
	if q["sdkappid"] == "" {
		return fail(60012, "sdkappid missing")
	}
	if q["sdkappid"] != strconv.Itoa(s.cfg.SDKAppID) {
		return fail(60006, "invalid sdkappid")
	}
	if q["identifier"] != s.cfg.AdminIdentifier {
		return fail(60010, "identifier is not an app admin")
	}
	if q["usersig"] == "" {
		return fail(70002, "usersig is empty")
	}
	s.mu.Lock()
	now := s.now()
	s.mu.Unlock()
	err := tencentyun.VerifyUserSig(uint64(s.cfg.SDKAppID), s.cfg.SecretKey, s.cfg.AdminIdentifier, q["usersig"], now)
	switch {
	case err == nil:
		return answer{}
	case errors.Is(err, tencentyun.ErrExpired):
		return fail(70001, "usersig expired")
	case errors.Is(err, tencentyun.ErrIdentifierNotMatch):
		return fail(70013, "usersig identifier mismatch")
	case errors.Is(err, tencentyun.ErrSdkAppIDNotMatch):
		return fail(70014, "usersig sdkappid mismatch")
	case errors.Is(err, tencentyun.ErrSigNotMatch):
		return fail(70009, "usersig does not match the key")
	}
	return fail(70003, "usersig check failed")
}

// Request bodies, declared independently of the sink.
type (
	groupMsgBody struct {
		GroupID     *string         `json:"GroupId"`
		Random      *uint32         `json:"Random"`
		MsgPriority string          `json:"MsgPriority"`
		MsgBody     json.RawMessage `json:"MsgBody"`
	}
	msgElem struct {
		MsgType    string `json:"MsgType"`
		MsgContent struct {
			Data string `json:"Data"`
			Desc string `json:"Desc"`
			Ext  string `json:"Ext"`
		} `json:"MsgContent"`
	}
	notificationBody struct {
		GroupID *string `json:"GroupId"`
		Content *string `json:"Content"`
	}
)

func (s *Server) deliver(api, sig string, r *http.Request) answer {
	if api == APISendGroupSystemNotification {
		var b notificationBody
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			return fail(10011, "body is not valid JSON")
		}
		if b.Content == nil || *b.Content == "" {
			return fail(10004, "Content is required")
		}
		if len(*b.Content) > s.cfg.MaxBodyBytes {
			return fail(80002, "message body too long")
		}
		return s.store(b.GroupID, Message{API: api, Content: *b.Content, UserSig: sig}, nil)
	}
	var b groupMsgBody
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		return fail(10011, "body is not valid JSON")
	}
	if b.Random == nil {
		return fail(10004, "Random is required")
	}
	switch b.MsgPriority {
	case "", "High", "Normal", "Low", "Lowest":
	default:
		return fail(10004, "invalid MsgPriority")
	}
	var elems []msgElem
	if err := json.Unmarshal(b.MsgBody, &elems); err != nil || len(elems) == 0 {
		return fail(90002, "MsgBody must be a non-empty array of message elements")
	}
	if len(b.MsgBody) > s.cfg.MaxBodyBytes {
		return fail(80002, "message body too long")
	}
	m := Message{API: api, Random: *b.Random, Priority: b.MsgPriority, UserSig: sig}
	for _, e := range elems {
		if e.MsgType == "" {
			return fail(90002, "MsgType is required")
		}
		m.Elems = append(m.Elems, Elem{Type: e.MsgType, Data: e.MsgContent.Data, Desc: e.MsgContent.Desc, Ext: e.MsgContent.Ext})
	}
	return s.store(b.GroupID, m, b.Random)
}

// store records m for its group; a repeated Random within the window is
// acknowledged but not stored again.
func (s *Server) store(group *string, m Message, random *uint32) answer {
	if group == nil {
		return fail(10004, "GroupId is required")
	}
	if *group == "" || len(*group) > 48 {
		return fail(10015, "invalid GroupId")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed[*group] {
		return fail(10010, "group does not exist")
	}
	now := s.now()
	if random != nil {
		if prev, ok := s.randoms.lookup(groupRandom{*group, *random}, now); ok {
			s.duplicate++
			return answer{ActionStatus: "OK", MsgTime: now.Unix(), MsgSeq: prev.seq}
		}
	}
	s.seq[*group]++
	m.GroupID, m.Seq = *group, s.seq[*group]
	if s.cfg.ForgetUserSigs {
		m.UserSig = ""
	}
	s.messages.push(m)
	if random != nil {
		s.randoms.add(groupRandom{*group, *random}, now, m.Seq)
	}
	if len(s.seq) > 2*s.cfg.MaxRecords {
		s.forgetIdleGroups()
	}
	if m.API == APISendGroupSystemNotification {
		return answer{ActionStatus: "OK"}
	}
	return answer{ActionStatus: "OK", MsgTime: now.Unix(), MsgSeq: m.Seq}
}

// forgetIdleGroups drops the message counters of groups that have no
// message kept and no Random remembered, so that the counters stay
// bounded by the records. s.mu is held.
func (s *Server) forgetIdleGroups() {
	active := map[string]bool{}
	s.messages.each(func(m Message) { active[m.GroupID] = true })
	for k := range s.randoms.sent {
		active[k.group] = true
	}
	for g := range s.seq {
		if !active[g] {
			delete(s.seq, g)
		}
	}
}

func (s *Server) reply(w http.ResponseWriter, a answer) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(a); err != nil {
		http.Error(w, fmt.Sprint(err), http.StatusInternalServerError)
	}
}
