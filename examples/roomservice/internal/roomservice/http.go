package roomservice

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// maxBodyBytes bounds a request body.
const maxBodyBytes = 64 << 10

func (a *App) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/rooms", a.handleCreate)
	mux.HandleFunc("POST /v1/rooms/{room_id}/join", a.handleMember(KindJoin))
	mux.HandleFunc("POST /v1/rooms/{room_id}/leave", a.handleMember(KindLeave))
	mux.HandleFunc("POST /v1/rooms/{room_id}/gifts", a.handleGift)
	mux.HandleFunc("GET /v1/rooms/{room_id}", a.handleGetRoom)
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
	})
	// Readiness never depends on Tencent IM: IM trouble is the outbox's
	// business, and the service keeps taking commands through it.
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if s := a.State(); s != stateServing {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": s.String()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
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
	cmd.RequestID = requestID(w, r)
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
// answered 400 or 413 and returns false.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("more than one JSON value")
	}
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, &apiError{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("body over %d bytes", maxBodyBytes)})
		return false
	}
	writeError(w, badRequest("malformed_json", "request body: %v", err))
	return false
}

// requestID returns the caller's X-Request-Id or a new one, and echoes it.
func requestID(w http.ResponseWriter, r *http.Request) string {
	id := r.Header.Get("X-Request-Id")
	if id == "" || len(id) > 128 {
		id = newEventID(time.Now())
	}
	w.Header().Set("X-Request-Id", id)
	return id
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
