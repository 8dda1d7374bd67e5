package activityservice

import (
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HTTP server limits (room-service's defaults).
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 15 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 16 << 10
)

func (a *App) newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, WriteTimeout: writeTimeout,
		IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
}

// publicHandler serves the read API and the probes.
func (a *App) publicHandler() http.Handler {
	mux := http.NewServeMux()
	a.probes(mux)
	mux.HandleFunc("GET /users/{user_id}/activity", a.handleActivity)
	return mux
}

// adminHandler serves /metrics and the probes.
func (a *App) adminHandler() http.Handler {
	mux := http.NewServeMux()
	a.probes(mux)
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics, promhttp.HandlerOpts{}))
	return mux
}

// probes adds /healthz (the process answers) and /readyz (200 while
// serving, 503 while starting and from the first moment of a shutdown).
// As room-service's, readiness does not follow MySQL or NATS: a shared
// outage would take every instance out at once; it shows on /metrics
// (activity_deliveries_total{outcome="failed"}) and in the logs.
func (a *App) probes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if s := a.State(); s != stateServing {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": s.String()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
}

// Activity is what GET /users/{id}/activity answers.
type Activity struct {
	UserID string `json:"user_id"`
	// Level is the level the gift points sent reached (0: none yet).
	Level         int        `json:"level"`
	GiftsSent     GiftTotals `json:"gifts_sent"`
	GiftsReceived GiftTotals `json:"gifts_received"`
	// RoomsJoined counts distinct rooms; Joins every join.
	RoomsJoined  int64 `json:"rooms_joined"`
	Joins        int64 `json:"joins"`
	Leaves       int64 `json:"leaves"`
	RoomsCreated int64 `json:"rooms_created"`
}

// GiftTotals counts gifts (one per gift command), their items (the
// commands' counts) and their points.
type GiftTotals struct {
	Count  int64 `json:"count"`
	Items  int64 `json:"items"`
	Points int64 `json:"points"`
}

func (a *App) handleActivity(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("user_id")
	if !validKey(id) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_field", "message": "user_id must be 1 to 64 bytes of UTF-8"})
		return
	}
	act, err := readActivity(r, a.db, id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "message": "no activity for this user"})
	case err != nil:
		a.log.ErrorContext(r.Context(), "read activity failed", slog.Any("error", err))
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal", "message": "internal error"})
	default:
		writeJSON(w, http.StatusOK, act)
	}
}

// readActivity reads a user's activity; sql.ErrNoRows when there is
// none. Gifts received are those sent in the rooms the user owns.
func readActivity(r *http.Request, db *sql.DB, id string) (Activity, error) {
	act := Activity{UserID: id}
	err := db.QueryRowContext(r.Context(), "SELECT level, gifts_sent, gift_items_sent, points_sent, rooms_joined, joins, leaves, rooms_created"+
		" FROM activity_users WHERE user_id = ?", id).Scan(&act.Level, &act.GiftsSent.Count, &act.GiftsSent.Items, &act.GiftsSent.Points,
		&act.RoomsJoined, &act.Joins, &act.Leaves, &act.RoomsCreated)
	if err != nil {
		return Activity{}, err
	}
	g := &act.GiftsReceived
	err = db.QueryRowContext(r.Context(), "SELECT COALESCE(SUM(gifts), 0), COALESCE(SUM(gift_items), 0), COALESCE(SUM(gift_points), 0)"+
		" FROM activity_rooms WHERE owner_id = ?", id).Scan(&g.Count, &g.Items, &g.Points)
	return act, err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
