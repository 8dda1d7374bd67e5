package postgres

import (
	"database/sql"
	"log/slog"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox/sqlinbox"
)

// A *sql.DB that is never used: New does not touch the database.
func unusedDB(t *testing.T) *sql.DB {
	db, err := sql.Open("pgx", "postgres://u:p@127.0.0.1:1/x")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestOptionsDefaults(t *testing.T) {
	ib, err := New(unusedDB(t), Options{Consumer: "activity"})
	require.NoError(t, err)
	require.Equal(t, DefaultTable, ib.Table())
	require.Equal(t, "activity", ib.Consumer())
	require.Equal(t, sqlinbox.DefaultMaxAttempts, ib.Options().MaxAttempts)
	require.Equal(t, sql.LevelReadCommitted, ib.Options().Isolation)
	require.Same(t, slog.Default(), ib.Options().Logger)
	require.Nil(t, ib.Options().Observer)
}

func TestOptionsOverrides(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	for _, iso := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable} {
		ib, err := New(unusedDB(t), Options{Table: "activity_inbox", Consumer: "activity-service.v2", MaxAttempts: 3,
			Isolation: iso, Logger: logger})
		require.NoError(t, err)
		require.Equal(t, "activity_inbox", ib.Table())
		require.Equal(t, "activity-service.v2", ib.Consumer())
		require.Equal(t, 3, ib.Options().MaxAttempts)
		require.Equal(t, iso, ib.Options().Isolation)
		require.Same(t, logger, ib.Options().Logger)
	}
	ib, err := New(unusedDB(t), Options{Consumer: strings.Repeat("c", sqlinbox.MaxConsumerLength), Table: strings.Repeat("t", sqlinbox.MaxTableLength), MaxAttempts: sqlinbox.MaxMaxAttempts})
	require.NoError(t, err, "the limits themselves are accepted")
	require.Equal(t, sqlinbox.MaxMaxAttempts, ib.Options().MaxAttempts)
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no consumer", Options{}, `Consumer "": required`},
		{"consumer with a quote", Options{Consumer: "a'b"}, `Consumer "a'b"`},
		{"consumer too long", Options{Consumer: strings.Repeat("c", sqlinbox.MaxConsumerLength+1)}, "Consumer"},
		{"consumer starting with a dot", Options{Consumer: ".x"}, "Consumer"},
		{"consumer not ASCII", Options{Consumer: "活动"}, "Consumer"},
		{"table with a double quote", Options{Consumer: "c", Table: `in"box`}, `Table "in\"box"`},
		{"table with upper case", Options{Consumer: "c", Table: "Inbox"}, `Table "Inbox": must be lower-case`},
		{"table with a schema", Options{Consumer: "c", Table: "public.inbox"}, `Table "public.inbox"`},
		{"table too long", Options{Consumer: "c", Table: strings.Repeat("t", sqlinbox.MaxTableLength+1)}, "Table"},
		{"table starting with a digit", Options{Consumer: "c", Table: "1inbox"}, "Table"},
		{"negative attempts", Options{Consumer: "c", MaxAttempts: -1}, "MaxAttempts -1"},
		{"too many attempts", Options{Consumer: "c", MaxAttempts: sqlinbox.MaxMaxAttempts + 1}, "MaxAttempts 1001"},
		{"read uncommitted", Options{Consumer: "c", Isolation: sql.LevelReadUncommitted}, "Isolation Read Uncommitted"},
		{"snapshot", Options{Consumer: "c", Isolation: sql.LevelSnapshot}, "Isolation Snapshot"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(unusedDB(t), tc.opts)
			require.ErrorContains(t, err, tc.want)
			require.True(t, strings.HasPrefix(err.Error(), "postgres inbox: "), err.Error())
		})
	}
	_, err := New(unusedDB(t), Options{Table: "Bad", MaxAttempts: -1})
	require.ErrorContains(t, err, "Table")
	require.ErrorContains(t, err, "Consumer")
	require.ErrorContains(t, err, "MaxAttempts", "every bad field is named at once")
	_, err = New(nil, Options{Consumer: "c"})
	require.ErrorContains(t, err, "db is nil")
}
