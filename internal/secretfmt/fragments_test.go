package secretfmt_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// allPieces is the plain definition Fragments must agree with: every
// substring of secret of MinFragment bytes or more that text holds and
// no public text holds.
func allPieces(text, secret string, public ...string) []string {
	var out []string
	for i := range len(secret) {
		for j := i + secretfmt.MinFragment; j <= len(secret); j++ {
			s := secret[i:j]
			isPublic := false
			for _, p := range public {
				isPublic = isPublic || strings.Contains(p, s)
			}
			if strings.Contains(text, s) && !isPublic {
				out = append(out, s)
			}
		}
	}
	return out
}

// TestFragmentsFindsEveryPiece: Fragments is empty exactly when no
// substring of 4 bytes or more of the secret is in the text (public
// ones aside), and each piece it names is in the text.
func TestFragmentsFindsEveryPiece(t *testing.T) {
	for _, tc := range []struct {
		name, text, secret string
		public             []string
		want               []string
	}{
		{"whole", "dial app:Hunter2x@db", "Hunter2x", nil, []string{"Hunt", "unte", "nter", "ter2", "er2x"}},
		{"the tail a bad parse left", "lookup ss#w0rd@127.0.0.1: no such host", "p@ss#w0rd", nil, []string{"ss#w", "s#w0", "#w0r", "w0rd"}},
		{"three bytes are not a piece", "user=postgres", "p", nil, nil},
		{"absent", "failed to connect to `user=app database=rooms`", "S3cret-pg-PW", nil, nil},
		{"the user repeats the password", "failed to connect to `user=postgres`", "postgres", []string{"postgres"}, nil},
		{"public in part", "user=postgres host=127.0.0.1", "postgres-127.0", []string{"postgres", "127.0.0.1"}, nil},
		{"public in part, the rest shown", "user=postgres tail=res-9xyz", "postgres-9xyz", []string{"postgres"}, []string{"res-", "es-9", "s-9x", "-9xy", "9xyz"}},
		{"repeated piece named once", "abcdabcd", "abcdabcd", nil, []string{"abcd", "bcda", "cdab", "dabc"}},
		{"invalid UTF-8", "x\xff\xfeAB\xfdy", "\xff\xfeAB\xfd", nil, []string{"\xff\xfeAB", "\xfeAB\xfd"}},
	} {
		got := secretfmt.Fragments(tc.text, tc.secret, tc.public...)
		require.Equal(t, tc.want, got, tc.name)
		require.Equal(t, len(got) == 0, len(allPieces(tc.text, tc.secret, tc.public...)) == 0, tc.name)
	}
}

// TestHideLeavesTheTextOutWhole: an error whose text holds a piece of
// the password is replaced whole, never cut about (the old redactor
// turned every "p" of "user=postgres" into "[redacted]" for the password
// "p"); its sentinels still match.
func TestHideLeavesTheTextOutWhole(t *testing.T) {
	mine := errors.New("a sentinel of the caller")
	base := fmt.Errorf("lookup ss#w0rd@127.0.0.1: no such host: %w; %w", context.DeadlineExceeded, mine)
	err := secretfmt.Hide(base, "p@ss#w0rd", []string{"postgres", "127.0.0.1"}, mine)
	require.EqualError(t, err, secretfmt.Hidden)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, mine)
	require.Nil(t, errors.Unwrap(err), "the original is out of reach")

	plain := errors.New("failed to connect to `user=postgres database=rooms`: dial tcp 127.0.0.1:1: connection refused")
	require.Same(t, plain, secretfmt.Hide(plain, "p", nil), "a 1-byte password is never looked for")
	require.Same(t, plain, secretfmt.Hide(plain, "postgres", []string{"postgres"}), "the user is shown for what it is")
	require.Same(t, plain, secretfmt.Hide(plain, "", nil))
	require.NoError(t, secretfmt.Hide(nil, "x", nil))
}
