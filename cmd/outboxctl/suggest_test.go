package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"table", "table", 0}, {"", "abc", 3}, {"tabel", "table", 1}, {"stuts", "stats", 1},
		{"lst", "list", 1}, {"olderthan", "older-than", 1}, {"yes", "key", 2}, {"kitten", "sitting", 3}, {"ab", "ba", 1},
	} {
		require.Equal(t, tc.want, editDistance(tc.a, tc.b), "%q %q", tc.a, tc.b)
		require.Equal(t, tc.want, editDistance(tc.b, tc.a), "%q %q", tc.b, tc.a)
	}
}

func TestSuggest(t *testing.T) {
	flags := []string{"after", "dsn", "json", "key", "limit", "status", "table", "timeout", "type"}
	for _, tc := range []struct {
		got  string
		want []string
	}{
		{"tabel", []string{"table"}},
		{"TABLE", []string{"table"}},
		{"limt", []string{"limit"}},
		{"tpye", []string{"type"}},
		{"jsno", []string{"json"}},
		{"statsu", []string{"status"}},
		{"time", []string{"timeout"}}, // no flag within one edit; a prefix of one
		{"yes", nil},
		{"frobnicate", nil},
		{"", nil},
		{"ti", nil},
		{"stat", []string{"status"}}, // two edits, a prefix of one flag
	} {
		require.Equal(t, tc.want, suggest(tc.got, flags), tc.got)
	}
	require.Equal(t, []string{"add"}, suggest("ad", []string{"add", "list", "remove"}))
	require.Equal(t, "; did you mean --key or --yes?", didYouMean("kes", "--", []string{"key", "yes", "limit"}))
	require.Equal(t, "", didYouMean("zzz", "--", []string{"key", "yes"}))
}
