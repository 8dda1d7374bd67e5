//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
)

// gift points of room-service's catalog (commands.go).
var giftPoints = map[string]int64{"heart": 1, "rose": 5, "car": 50, "rocket": 100}

// userTotals is what activity-service must report for a user.
type userTotals struct {
	GiftsSent, ItemsSent, PointsSent             int64
	GiftsReceived, ItemsReceived, PointsReceived int64
	Joins, Leaves, RoomsCreated                  int64
	Rooms                                        map[string]bool // distinct rooms joined
}

// model is the room-service state the test expects, from the commands
// room-service accepted, and what activity-service must derive from it.
type model struct {
	rng     *rand.Rand
	users   []string
	owner   map[string]string          // room → owner
	members map[string]map[string]bool // room → members
	rooms   []string
	totals  map[string]*userTotals
}

func newModel(seed uint64, users int) *model {
	m := &model{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), owner: map[string]string{},
		members: map[string]map[string]bool{}, totals: map[string]*userTotals{}}
	for i := range users {
		m.users = append(m.users, fmt.Sprintf("user%02d", i))
	}
	return m
}

func (m *model) user(u string) *userTotals {
	t := m.totals[u]
	if t == nil {
		t = &userTotals{Rooms: map[string]bool{}}
		m.totals[u] = t
	}
	return t
}

// command is one room command to send, and whether room-service must
// accept it.
type command struct {
	kind, room, user, gift string
	count                  int
	valid                  bool
	path                   string
	body                   map[string]any
}

// next picks a command: joins, leaves and gifts, a few new rooms, and
// about one in ten that room-service must refuse (a gift or a leave by a
// non-member, a second join).
func (m *model) next(i int) command {
	id := fmt.Sprintf("cmd-%d", i)
	if len(m.rooms) < 3 || m.rng.IntN(40) == 0 {
		room, owner := fmt.Sprintf("room%02d", len(m.rooms)), m.users[m.rng.IntN(len(m.users))]
		return command{kind: "create", room: room, user: owner, valid: true, path: "/v1/rooms",
			body: map[string]any{"room_id": room, "owner_id": owner, "command_id": id}}
	}
	room := m.rooms[m.rng.IntN(len(m.rooms))]
	refuse := m.rng.IntN(10) == 0
	switch r := m.rng.IntN(10); {
	case r < 3:
		user := m.pick(room, refuse)
		return command{kind: "join", room: room, user: user, valid: !m.members[room][user], path: "/v1/rooms/" + room + "/join",
			body: map[string]any{"user_id": user, "command_id": id}}
	case r < 4:
		user := m.pick(room, !refuse)
		return command{kind: "leave", room: room, user: user, valid: m.members[room][user], path: "/v1/rooms/" + room + "/leave",
			body: map[string]any{"user_id": user, "command_id": id}}
	default:
		user := m.pick(room, !refuse)
		gifts := []string{"heart", "rose", "car", "rocket"}
		g, count := gifts[m.rng.IntN(len(gifts))], 1+m.rng.IntN(3)
		return command{kind: "gift", room: room, user: user, gift: g, count: count, valid: m.members[room][user], path: "/v1/rooms/" + room + "/gifts",
			body: map[string]any{"user_id": user, "gift_id": g, "count": count, "command_id": id}}
	}
}

// pick returns a user who is (member) or is not a member of room, if
// there is one, and any user otherwise.
func (m *model) pick(room string, member bool) string {
	var candidates []string
	for _, u := range m.users {
		if m.members[room][u] == member {
			candidates = append(candidates, u)
		}
	}
	if len(candidates) == 0 {
		candidates = m.users
	}
	return candidates[m.rng.IntN(len(candidates))]
}

// accepted applies a command room-service accepted.
func (m *model) accepted(c command) {
	switch c.kind {
	case "create":
		m.rooms = append(m.rooms, c.room)
		m.owner[c.room], m.members[c.room] = c.user, map[string]bool{}
		m.user(c.user).RoomsCreated++
	case "join":
		m.members[c.room][c.user] = true
		u := m.user(c.user)
		u.Joins++
		u.Rooms[c.room] = true
	case "leave":
		delete(m.members[c.room], c.user)
		m.user(c.user).Leaves++
	case "gift":
		points := giftPoints[c.gift] * int64(c.count)
		s := m.user(c.user)
		s.GiftsSent, s.ItemsSent, s.PointsSent = s.GiftsSent+1, s.ItemsSent+int64(c.count), s.PointsSent+points
		r := m.user(m.owner[c.room])
		r.GiftsReceived, r.ItemsReceived, r.PointsReceived = r.GiftsReceived+1, r.ItemsReceived+int64(c.count), r.PointsReceived+points
	}
}

// levelUps are the (user, level) pairs the points sent reach, each once.
func (m *model) levelUps(levels []int64) map[string]int {
	want := map[string]int{}
	for u, t := range m.totals {
		for l, threshold := range levels {
			if t.PointsSent >= threshold {
				want[fmt.Sprintf("%s/%d", u, l+1)] = 1
			}
		}
	}
	return want
}
