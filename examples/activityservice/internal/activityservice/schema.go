package activityservice

import (
	"context"
	"database/sql"
	"fmt"
)

// The activity tables, in activity-service's own database:
//
//   - activity_users: per user, gifts sent (gifts, items, points), the
//     level those points reached, joins, leaves, rooms created, and how
//     many distinct rooms the user joined.
//   - activity_user_rooms: the rooms a user joined, once each.
//   - activity_rooms: per room, its owner (from RoomCreated) and the
//     gifts sent in it. The owner receives a room's gifts (a live
//     room's host), so gifts received are summed over the rooms a user
//     owns when read: every update is an addition, and the result does
//     not depend on the order the events arrive in.
//
// Every write is made by the inbox's handler, in the transaction that
// records the event as processed.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS activity_users (
		user_id VARBINARY(64) NOT NULL,
		gifts_sent BIGINT NOT NULL DEFAULT 0,
		gift_items_sent BIGINT NOT NULL DEFAULT 0,
		points_sent BIGINT NOT NULL DEFAULT 0,
		level INT NOT NULL DEFAULT 0,
		joins BIGINT NOT NULL DEFAULT 0,
		leaves BIGINT NOT NULL DEFAULT 0,
		rooms_joined BIGINT NOT NULL DEFAULT 0,
		rooms_created BIGINT NOT NULL DEFAULT 0,
		updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
		PRIMARY KEY (user_id)
	) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS activity_user_rooms (
		user_id VARBINARY(64) NOT NULL,
		room_id VARBINARY(64) NOT NULL,
		first_joined_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
		PRIMARY KEY (user_id, room_id)
	) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS activity_rooms (
		room_id VARBINARY(64) NOT NULL,
		owner_id VARBINARY(64) NULL,
		gifts BIGINT NOT NULL DEFAULT 0,
		gift_items BIGINT NOT NULL DEFAULT 0,
		gift_points BIGINT NOT NULL DEFAULT 0,
		PRIMARY KEY (room_id),
		KEY idx_owner (owner_id)
	) ENGINE=InnoDB`,
}

// migrate creates the activity tables; it is idempotent.
func migrate(ctx context.Context, db *sql.DB) error {
	for _, stmt := range schema {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrate activity tables: %w", err)
		}
	}
	return nil
}
