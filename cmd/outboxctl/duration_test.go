package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseDuration(t *testing.T) {
	const day, week = 24 * time.Hour, 7 * 24 * time.Hour
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"0", 0}, {"+0", 0}, {"0s", 0}, {"90s", 90 * time.Second}, {"1.5h", 90 * time.Minute}, {"300ms", 300 * time.Millisecond},
		{"1d", day}, {"2d12h", 2*day + 12*time.Hour}, {"1w", week}, {"1w2d", week + 2*day}, {"1.5d", 36 * time.Hour},
		{"+3d", 3 * day}, {"1h30m", 90 * time.Minute}, {"106751d", 106751 * day}, {"1d1d", 2 * day},
	} {
		got, err := parseDuration(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"-1d", "must not be negative"},
		{"-0", "must not be negative"},
		{"1x", `unknown unit "x"`},
		{"1dd", `unknown unit "dd"`},
		{"3", "3 what? give a unit"},
		{"1d2", "2 what? give a unit"},
		{"soon", "not a duration"},
		{"d", "not a duration"},
		{"1..5h", `"1..5" is not a number`},
		{".h", `"." is not a number`},
		{"106752d", "too long"},
		{"15251w", "too long"},
		{"106751d24h", "too long"},
		{"99999999999999999999h", "too long"},
	} {
		_, err := parseDuration(tc.in)
		require.ErrorContains(t, err, tc.want, tc.in)
	}
}
