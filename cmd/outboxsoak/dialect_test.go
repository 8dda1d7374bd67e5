package main

import (
	"errors"
	"strings"
	"testing"
)

// leaks returns the first fragment of 4 or more characters of secret in
// text, or "".
func leaks(text, secret string) string {
	for i := 0; i+4 <= len(secret); i++ {
		if strings.Contains(text, secret[i:i+4]) {
			return secret[i : i+4]
		}
	}
	return ""
}

// No fragment of a password reaches output, in any form a DSN takes,
// however the driver parses it: what run prints is describe() and
// errors through redact().
func TestDSNSecretsStaySecret(t *testing.T) {
	cases := []struct{ driver, dsn, password string }{
		{"mysql", "app:S3cret-my-PW@tcp(db.internal:3306)/orders", "S3cret-my-PW"},
		{"mysql", "app:p@ss#w0rd/x@tcp(db.internal:3306)/orders", "p@ss#w0rd/x"},
		{"postgres", "postgres://app:S3cret-pg-PW@db.internal:5432/orders", "S3cret-pg-PW"},
		{"postgres", "postgres://app:/S3cret-pg-PW@db.internal:5432/orders", "/S3cret-pg-PW"},
		{"postgres", "postgres://app:p@ss#w0rd@db.internal:5432/orders", "p@ss#w0rd"},
		{"postgres", "postgres://app:p@ss:w0rd@db.internal:5432/orders", "p@ss:w0rd"},
		{"postgres", "host=db.internal user=app password=S3cret-kv-PW dbname=orders", "S3cret-kv-PW"},
	}
	for _, tc := range cases {
		t.Run(tc.dsn, func(t *testing.T) {
			d, err := newDialect(tc.driver, tc.dsn)
			if err != nil {
				if f := leaks(err.Error(), tc.password); f != "" {
					t.Errorf("the parse error %q shows %q", err, f)
				}
				return
			}
			// What a driver's error might say of a misparsed DSN: the
			// DSN itself, and the pieces it was cut into.
			raw := errors.New("failed to connect to " + tc.dsn + ": lookup " + tc.password + "@db.internal: database " + tc.password[1:] + " does not exist")
			for what, text := range map[string]string{"describe": d.describe(""), "redact": d.redact(raw).Error()} {
				if f := leaks(text, tc.password); f != "" {
					t.Errorf("%s: %q shows %q", what, text, f)
				}
			}
		})
	}
}

func TestLikePrefix(t *testing.T) {
	if got := likePrefix(`soak_out%x\`); got != `soak\_out\%x\\%` {
		t.Errorf("likePrefix = %q", got)
	}
}
