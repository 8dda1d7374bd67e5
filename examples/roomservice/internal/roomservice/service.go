package roomservice

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// Command kinds.
const (
	KindCreate = "create"
	KindJoin   = "join"
	KindLeave  = "leave"
	KindGift   = "gift"
)

// Command is one room command, as the HTTP API received it.
type Command struct {
	Kind      string
	CommandID string // the idempotency key
	RoomID    string
	UserID    string // the owner, for create
	GiftID    string
	Count     int
	// RequestID and TraceParent travel with the events as headers, for
	// tracing only.
	RequestID   string
	TraceParent string
}

// Result is a command's response: the room after it, as a summary with
// member_count but no members (GET /v1/rooms/{id}/members lists them),
// and the events it emitted. It is what the command log stores, so its
// size does not grow with the room.
type Result struct {
	Room     Snapshot `json:"room"`
	EventIDs []string `json:"event_ids"`
}

// Heat rules and the gift catalog.
const (
	heatPerMember = 10
	maxGiftCount  = 9999
)

var giftPoints = map[string]int64{"heart": 1, "rose": 5, "car": 50, "rocket": 100}

var (
	roomIDRE    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,48}$`) // also a Tencent IM group ID
	userIDRE    = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,32}$`)
	commandIDRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
)

func (c Command) validate() error {
	check := func(field, v string, re *regexp.Regexp) error {
		if v == "" {
			return badRequest("missing_field", "%s is required", field)
		}
		if !re.MatchString(v) {
			return badRequest("invalid_field", "%s %q must match %s", field, v, re)
		}
		return nil
	}
	userField := "user_id"
	if c.Kind == KindCreate {
		userField = "owner_id"
	}
	errs := []error{check("command_id", c.CommandID, commandIDRE), check("room_id", c.RoomID, roomIDRE), check(userField, c.UserID, userIDRE)}
	if c.Kind == KindGift {
		if _, ok := giftPoints[c.GiftID]; !ok {
			errs = append(errs, badRequest("invalid_field", "gift_id %q is not in the catalog (heart, rose, car, rocket)", c.GiftID))
		}
		if c.Count < 1 || c.Count > maxGiftCount {
			errs = append(errs, badRequest("invalid_field", "count %d must be 1 to %d", c.Count, maxGiftCount))
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Service applies room commands: state, command log and outbox messages in
// one transaction, then the after-commit publish.
type Service struct {
	db        *sql.DB
	store     *mysql.Store
	publisher *outbox.Worker // PublishNow works whether or not the worker runs
	headStart time.Duration
	log       *slog.Logger
	now       func() time.Time
}

// maxTxTries bounds how often a command transaction is retried after a
// deadlock, lock wait timeout or lost connection.
const maxTxTries = 3

// Execute applies cmd. A repeated command ID with the same command
// returns the first result and emits nothing; with another command it is
// a 409 command_id_reused (see commands.go). Once the transaction has committed the command has
// succeeded: a failed publish afterwards is logged and left to the worker.
func (s *Service) Execute(ctx context.Context, cmd Command) (Result, error) {
	if err := cmd.validate(); err != nil {
		return Result{}, err
	}
	var (
		res      Result
		msgs     []outbox.Message
		replayed bool
		err      error
	)
	for try := 1; ; try++ {
		res, msgs, replayed, err = s.runTx(ctx, cmd)
		if err == nil || !mysql.IsTransient(err) || try == maxTxTries {
			break
		}
		s.log.WarnContext(ctx, "room command transaction failed; retrying", slog.String("command_id", cmd.CommandID), slog.Any("error", err))
	}
	if err != nil {
		return Result{}, err
	}
	if !replayed {
		// The fast path: the worker may not race it (head start plus the
		// lease PublishNow takes), each sink call costs the request at
		// most AfterCommitTimeout (none while the sink is held off, but
		// a probe now and then), and its
		// failure fails nothing. The worker has logged what failed; this
		// only ties it to the command.
		if err := s.publisher.PublishNow(context.WithoutCancel(ctx), msgs...); err != nil {
			s.log.DebugContext(ctx, "room events left to the outbox worker after commit",
				slog.String("command_id", cmd.CommandID), slog.String("room_id", cmd.RoomID), slog.Any("error", err))
		}
	}
	return res, nil
}

// runTx runs one try of the command's transaction.
func (s *Service) runTx(ctx context.Context, cmd Command) (res Result, msgs []outbox.Message, replayed bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Result{}, nil, false, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	nowMs := s.now().UnixMilli()
	taken, err := logCommand(ctx, tx, cmd, nowMs)
	if err != nil {
		return Result{}, nil, false, err
	}
	if taken {
		// A replay only reads; end the transaction now, which releases the
		// shared lock the duplicate key took (else it would last until ctx
		// ends, holding up PurgeCommands and the pool).
		res, err = replay(ctx, tx, cmd)
		if err == nil {
			err = tx.Rollback()
		}
		return res, nil, true, err
	}
	if res, msgs, err = s.apply(ctx, tx, cmd, nowMs); err != nil {
		return Result{}, nil, false, err
	}
	if err = logResponse(ctx, tx, cmd.CommandID, res); err != nil {
		return Result{}, nil, false, err
	}
	return res, msgs, false, tx.Commit()
}

// apply changes the room, builds the events and enqueues them.
func (s *Service) apply(ctx context.Context, tx *sql.Tx, cmd Command, nowMs int64) (Result, []outbox.Message, error) {
	r, events, err := applyToRoom(ctx, tx, cmd, nowMs)
	if err != nil {
		return Result{}, nil, err
	}
	headers := map[string]string{"request_id": cmd.RequestID}
	if cmd.TraceParent != "" {
		headers[outbox.HeaderTraceParent] = cmd.TraceParent
	}
	res := Result{EventIDs: make([]string, 0, len(events))}
	msgs := make([]outbox.Message, 0, len(events))
	for _, ev := range events {
		env := Envelope{
			EventID: newEventID(s.now()), EventType: ev.typ, RoomID: r.id, CommandID: cmd.CommandID,
			RequestID: cmd.RequestID, Version: r.version, OccurredAtMs: nowMs, Data: ev.data,
		}
		m, err := env.message(headers)
		if err != nil {
			return Result{}, nil, err
		}
		msgs = append(msgs, m)
		res.EventIDs = append(res.EventIDs, m.ID)
	}
	if err := s.store.Enqueue(ctx, tx, &outbox.EnqueueOptions{HeadStart: s.headStart}, msgs...); err != nil {
		return Result{}, nil, err
	}
	res.Room, err = loadSummary(ctx, tx, r.id)
	return res, msgs, err
}

type event struct {
	typ  string
	data any
}

// applyToRoom is the room logic: it changes the room's rows and says which
// events happened.
func applyToRoom(ctx context.Context, tx *sql.Tx, cmd Command, nowMs int64) (room, []event, error) {
	var (
		r      room
		events []event
		err    error
	)
	if cmd.Kind == KindCreate {
		r, err = createRoom(ctx, tx, cmd.RoomID, cmd.UserID, nowMs)
		events = []event{{RoomCreated, map[string]any{"owner_id": cmd.UserID}}}
	} else {
		r, err = lockRoom(ctx, tx, cmd.RoomID)
	}
	if err != nil {
		return room{}, nil, err
	}
	switch cmd.Kind {
	case KindJoin, KindLeave:
		if events, err = changeMembers(ctx, tx, &r, cmd, nowMs); err != nil {
			return room{}, nil, err
		}
	case KindGift:
		if events, err = sendGift(ctx, tx, &r, cmd); err != nil {
			return room{}, nil, err
		}
	case KindCreate:
	default:
		return room{}, nil, fmt.Errorf("unknown command kind %q", cmd.Kind)
	}
	r.version++
	return r, events, saveRoom(ctx, tx, r)
}

// changeMembers adds (join) or removes (leave) cmd's user, moves the
// room's heat by heatPerMember (never below 0), and returns the member
// event and the heat event.
func changeMembers(ctx context.Context, tx *sql.Tx, r *room, cmd Command, nowMs int64) ([]event, error) {
	var err error
	eventType := RoomUserJoined
	if cmd.Kind == KindJoin {
		err = addMember(ctx, tx, r.id, cmd.UserID, nowMs)
		r.heat += heatPerMember
	} else {
		eventType = RoomUserLeft
		err = removeMember(ctx, tx, r.id, cmd.UserID)
		r.heat = max(0, r.heat-heatPerMember)
	}
	if err != nil {
		return nil, err
	}
	n, err := memberCount(ctx, tx, r.id)
	if err != nil {
		return nil, err
	}
	return []event{
		{eventType, map[string]any{"user_id": cmd.UserID, "member_count": n}},
		{RoomHeatChanged, map[string]any{"heat": r.heat}},
	}, nil
}

func sendGift(ctx context.Context, tx *sql.Tx, r *room, cmd Command) ([]event, error) {
	var member int
	err := tx.QueryRowContext(ctx, "SELECT 1 FROM room_members WHERE room_id = ? AND user_id = ?", r.id, cmd.UserID).Scan(&member)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, conflict("not_member", "user %q is not in room %q", cmd.UserID, r.id)
	}
	if err != nil {
		return nil, err
	}
	points := giftPoints[cmd.GiftID] * int64(cmd.Count)
	if err := addGiftPoints(ctx, tx, r.id, cmd.UserID, points); err != nil {
		return nil, err
	}
	r.heat += points
	rank, err := ranking(ctx, tx, r.id)
	if err != nil {
		return nil, err
	}
	return []event{
		{RoomGiftSent, map[string]any{"user_id": cmd.UserID, "gift_id": cmd.GiftID, "count": cmd.Count, "points": points}},
		{RoomHeatChanged, map[string]any{"heat": r.heat}},
		{RoomRankChanged, map[string]any{"gift_ranking": rank}},
	}, nil
}
