package activityservice

import (
	"database/sql"
	"errors"
	"log/slog"
	"net/http"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// publicHandler serves the read API and the probes.
func (a *App) publicHandler() http.Handler {
	mux := http.NewServeMux()
	a.Probes(mux)
	mux.HandleFunc("GET /users/{user_id}/activity", a.handleActivity)
	return mux
}

// adminHandler serves /metrics and the probes.
func (a *App) adminHandler() http.Handler {
	mux := http.NewServeMux()
	a.Probes(mux)
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics, promhttp.HandlerOpts{}))
	return mux
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

func writeJSON(w http.ResponseWriter, status int, v any) { svckit.WriteJSON(w, status, v) }
