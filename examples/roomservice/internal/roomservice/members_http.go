package roomservice

import (
	"net/http"
	"strconv"
)

// membersPageResponse is GET /v1/rooms/{room_id}/members's answer.
type membersPageResponse struct {
	RoomID  string   `json:"room_id"`
	Members []string `json:"members"`
	// NextAfter is the after= of the next page; absent on the last.
	NextAfter string `json:"next_after,omitempty"`
}

// handleListMembers serves GET /v1/rooms/{room_id}/members?after=&limit=:
// a room's members in user_id order, limit of them (default 100, at most
// 500) after the user_id after (default: from the start). Pages follow
// next_after; a member who joins or leaves between pages shows up, or
// not, without shifting the others.
func (a *App) handleListMembers(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("room_id")
	if !roomIDRE.MatchString(id) {
		writeError(w, badRequest("invalid_field", "room_id %q must match %s", id, roomIDRE))
		return
	}
	q := r.URL.Query()
	after := q.Get("after")
	if after != "" && !userIDRE.MatchString(after) {
		writeError(w, badRequest("invalid_field", "after %q must be a user_id (match %s)", after, userIDRE))
		return
	}
	limit := membersPageSize
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxMembersPageSize {
			writeError(w, badRequest("invalid_field", "limit %q must be 1 to %d", s, maxMembersPageSize))
			return
		}
		limit = n
	}
	ctx := r.Context()
	var exists int
	if err := a.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM rooms WHERE room_id = ?", id).Scan(&exists); err != nil {
		a.fail(w, r, err)
		return
	}
	if exists == 0 {
		writeError(w, notFound("room %q does not exist", id))
		return
	}
	members, next, err := membersPage(ctx, a.db, id, after, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, membersPageResponse{RoomID: id, Members: members, NextAfter: next})
}
