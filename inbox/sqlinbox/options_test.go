package sqlinbox

import (
	"database/sql"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox/internal/sqldialect"
)

// namesOnly is a Dialect whose names alone are there: the options use
// nothing else.
type namesOnly struct{ sqldialect.Dialect }

func (namesOnly) Name() string { return "test inbox" }
func (namesOnly) TableName() (*regexp.Regexp, string) {
	return regexp.MustCompile(`^[a-z]+$`), "lower-case letters"
}

func TestOptionsValidate(t *testing.T) {
	d := namesOnly{}
	ok := Options{Consumer: "activity-service"}.withDefaults()
	require.NoError(t, ok.validate(d))
	require.Equal(t, DefaultTable, ok.Table)
	require.Equal(t, DefaultMaxAttempts, ok.MaxAttempts)
	require.Equal(t, sql.LevelReadCommitted, ok.Isolation)
	require.NotNil(t, ok.Logger)

	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no consumer", Options{}, `Consumer ""`},
		{"consumer too long", Options{Consumer: strings.Repeat("c", MaxConsumerLength+1)}, "Consumer"},
		{"consumer starts with a dot", Options{Consumer: ".c"}, `Consumer ".c"`},
		{"consumer of invalid UTF-8", Options{Consumer: "c\xff"}, `Consumer "c\xff"`},
		{"consumer with a newline", Options{Consumer: "c\nd"}, `Consumer "c\nd"`},
		{"table the dialect refuses", Options{Consumer: "c", Table: "in_box"}, `Table "in_box": must be lower-case letters, at most 48 characters`},
		{"table too long", Options{Consumer: "c", Table: strings.Repeat("t", MaxTableLength+1)}, "Table"},
		{"negative attempts", Options{Consumer: "c", MaxAttempts: -1}, "MaxAttempts -1: must be 1 to 1000"},
		{"too many attempts", Options{Consumer: "c", MaxAttempts: MaxMaxAttempts + 1}, "MaxAttempts 1001"},
		{"read uncommitted", Options{Consumer: "c", Isolation: sql.LevelReadUncommitted}, "Isolation Read Uncommitted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.withDefaults().validate(d)
			require.ErrorContains(t, err, "test inbox: "+tc.want)
			require.Len(t, strings.Split(err.Error(), "\n"), 1, "one field is wrong")
		})
	}
	err := Options{Table: "T", MaxAttempts: -1, Isolation: sql.LevelSnapshot}.validate(d)
	require.Len(t, strings.Split(err.Error(), "\n"), 4, "every wrong field is named")
}
