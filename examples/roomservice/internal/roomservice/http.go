package roomservice

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxui"
)

// maxBodyBytes bounds a request body.
const maxBodyBytes = 64 << 10

// publicHandler serves the public listener: the API behind its limits,
// and the probes, which no limit counts (a kubelet must reach them on the
// pod's port however busy the API is).
func (a *App) publicHandler() http.Handler {
	mux := http.NewServeMux()
	a.Probes(mux)
	mux.Handle("/", withRequestID(limitInFlight(a.cfg.HTTP.MaxInFlight, requireJSON(a.apiRoutes()))))
	return mux
}

// adminHandler serves the admin listener (loopback by default): /metrics,
// the probes and the outbox dashboard. It is never the public API's.
func (a *App) adminHandler() (http.Handler, error) {
	ui, err := a.outboxUI()
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	a.Probes(mux)
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics, promhttp.HandlerOpts{}))
	mux.Handle(OutboxUIPath, ui)
	return mux, nil
}

// OutboxUIPath is where the admin listener serves the operators' outbox
// dashboard (package outboxui): room_outbox's backlog, its dead letters
// and their requeue (switched off by http.outbox_ui_read_only), to
// loopback and http.outbox_ui_hosts only.
const OutboxUIPath = "/outbox/"

// outboxUI is the outbox dashboard. Its throughput sampler starts with
// the first request; Shutdown stops it once HTTP has stopped, before
// MySQL closes.
func (a *App) outboxUI() (*outboxui.Handler, error) {
	ui, err := outboxui.New(outboxui.Options{
		Outboxes: []outboxui.Outbox{a.store}, Path: OutboxUIPath,
		ReadOnly: a.cfg.HTTP.OutboxUIReadOnly, AllowedHosts: a.cfg.HTTP.OutboxUIHosts, Logger: a.log,
	})
	if err != nil {
		return nil, fmt.Errorf("outbox dashboard (http.outbox_ui_*): %w", err)
	}
	a.OnHTTPStopped(ui.Close)
	return ui, nil
}

func (a *App) apiRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/rooms", a.handleCreate)
	mux.HandleFunc("POST /v1/rooms/{room_id}/join", a.handleMember(KindJoin))
	mux.HandleFunc("POST /v1/rooms/{room_id}/leave", a.handleMember(KindLeave))
	mux.HandleFunc("POST /v1/rooms/{room_id}/gifts", a.handleGift)
	mux.HandleFunc("GET /v1/rooms/{room_id}", a.handleGetRoom)
	mux.HandleFunc("GET /v1/rooms/{room_id}/members", a.handleListMembers)
	return mux
}

// The request bodies, one per command, so that a field that does not
// belong to the command is rejected rather than ignored.
type (
	createRequest struct {
		RoomID    string `json:"room_id"`
		OwnerID   string `json:"owner_id"`
		CommandID string `json:"command_id"`
	}
	memberRequest struct {
		UserID    string `json:"user_id"`
		CommandID string `json:"command_id"`
	}
	giftRequest struct {
		UserID    string `json:"user_id"`
		GiftID    string `json:"gift_id"`
		Count     *int   `json:"count"`
		CommandID string `json:"command_id"`
	}
)

func (a *App) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if !decode(w, r, &req) {
		return
	}
	a.execute(w, r, Command{Kind: KindCreate, RoomID: req.RoomID, UserID: req.OwnerID, CommandID: req.CommandID})
}

func (a *App) handleMember(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req memberRequest
		if !decode(w, r, &req) {
			return
		}
		a.execute(w, r, Command{Kind: kind, RoomID: r.PathValue("room_id"), UserID: req.UserID, CommandID: req.CommandID})
	}
}

func (a *App) handleGift(w http.ResponseWriter, r *http.Request) {
	var req giftRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Count == nil {
		writeError(w, badRequest("missing_field", "count is required"))
		return
	}
	a.execute(w, r, Command{Kind: KindGift, RoomID: r.PathValue("room_id"), UserID: req.UserID,
		GiftID: req.GiftID, Count: *req.Count, CommandID: req.CommandID})
}

func (a *App) handleGetRoom(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("room_id")
	if !roomIDRE.MatchString(id) {
		writeError(w, badRequest("invalid_field", "room_id %q must match %s", id, roomIDRE))
		return
	}
	snap, err := loadSnapshot(r.Context(), a.db, id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

func (a *App) execute(w http.ResponseWriter, r *http.Request, cmd Command) {
	cmd.RequestID = requestID(w)
	cmd.TraceParent = traceParent(r)
	res, err := a.svc.Execute(r.Context(), cmd)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// fail answers a 4xx for the client's mistakes and a bare 500 otherwise
// (the details go to the log, not to the client).
func (a *App) fail(w http.ResponseWriter, r *http.Request, err error) {
	var apiErr *apiError
	if errors.As(err, &apiErr) {
		writeError(w, apiErr)
		return
	}
	a.log.ErrorContext(r.Context(), "request failed", slog.String("path", r.URL.Path),
		slog.String("request_id", w.Header().Get("X-Request-Id")), slog.Any("error", err))
	writeError(w, &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"})
}

// decode reads one JSON object into v, strictly; on failure it has
// answered 4xx and returns false.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errMoreThanOne
	}
	if err == nil {
		return true
	}
	writeError(w, decodeError(err))
	return false
}

var errMoreThanOne = errors.New("more than one JSON value")

// decodeError turns a decoding failure into the client's error. Messages
// name the JSON field and what it must be, never the Go type behind it.
func decodeError(err error) error {
	var (
		tooBig    *http.MaxBytesError
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
		netErr    net.Error
	)
	switch {
	case errors.As(err, &tooBig):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("body over %d bytes", maxBodyBytes)}
	case errors.As(err, &netErr) && netErr.Timeout():
		return &apiError{Status: http.StatusRequestTimeout, Code: "timeout", Message: "request body not received in time"}
	case errors.As(err, &typeErr) && typeErr.Field == "":
		return badRequest("malformed_json", "request body must be a JSON object")
	case errors.As(err, &typeErr):
		return badRequest("invalid_field", "%s: must be %s", typeErr.Field, jsonKind(typeErr.Type))
	case errors.As(err, &syntaxErr):
		return badRequest("malformed_json", "request body is not valid JSON (at byte %d)", syntaxErr.Offset)
	case errors.Is(err, io.EOF):
		return badRequest("malformed_json", "request body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed_json", "request body ends inside a JSON value")
	case errors.Is(err, errMoreThanOne):
		return badRequest("malformed_json", "request body must be one JSON object")
	}
	// encoding/json has no type for an unknown field, only this text.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if f, err := strconv.Unquote(name); err == nil {
			return badRequest("malformed_json", "unknown field %.64q", f)
		}
	}
	return badRequest("malformed_json", "request body is not valid JSON")
}

// jsonKind names what a Go type is as a JSON value.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// traceParent returns the request's W3C traceparent, or starts a new trace
// when it has none (or a malformed one), so that every event can be
// followed from the command through the worker's logs to the IM call.
func traceParent(r *http.Request) string {
	if tp := r.Header.Get("Traceparent"); outbox.ValidTraceParent(tp) {
		return tp
	}
	var ids [24]byte
	_, _ = rand.Read(ids[:])
	return "00-" + hex.EncodeToString(ids[:16]) + "-" + hex.EncodeToString(ids[16:]) + "-01"
}

func writeError(w http.ResponseWriter, err error) {
	var apiErr *apiError
	if !errors.As(err, &apiErr) {
		apiErr = &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}
	}
	writeJSON(w, apiErr.Status, map[string]*apiError{"error": apiErr})
}

func writeJSON(w http.ResponseWriter, status int, v any) { svckit.WriteJSON(w, status, v) }
