package txproc

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCommonValidate(t *testing.T) {
	ok := Common{Consumer: "activity-service"}.WithDefaults()
	require.Empty(t, ok.Validate("test inbox"))
	require.Equal(t, DefaultMaxAttempts, ok.MaxAttempts)
	require.Equal(t, sql.LevelReadCommitted, ok.Isolation)
	require.NotNil(t, ok.Logger)

	for _, tc := range []struct {
		name string
		c    Common
		want string
	}{
		{"no consumer", Common{}, `Consumer ""`},
		{"consumer too long", Common{Consumer: strings.Repeat("c", MaxConsumerLength+1)}, "Consumer"},
		{"consumer starts with a dot", Common{Consumer: ".c"}, `Consumer ".c"`},
		{"consumer of invalid UTF-8", Common{Consumer: "c\xff"}, `Consumer "c\xff"`},
		{"consumer with a newline", Common{Consumer: "c\nd"}, `Consumer "c\nd"`},
		{"negative attempts", Common{Consumer: "c", MaxAttempts: -1}, "MaxAttempts -1: must be 1 to 1000"},
		{"too many attempts", Common{Consumer: "c", MaxAttempts: MaxMaxAttempts + 1}, "MaxAttempts 1001"},
		{"read uncommitted", Common{Consumer: "c", Isolation: sql.LevelReadUncommitted}, "Isolation Read Uncommitted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.c.WithDefaults().Validate("test inbox")
			require.Len(t, errs, 1)
			require.Contains(t, errs[0].Error(), "test inbox: "+tc.want)
		})
	}
	require.Len(t, Common{Consumer: "", MaxAttempts: -1, Isolation: sql.LevelSnapshot}.Validate("x"), 3, "every wrong field is named")
}
