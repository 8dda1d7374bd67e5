package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNeverPrintsTheDSNPassword: neither the usage text nor an error shows
// the password of a DSN from MYSQL_DSN or -dsn, even one with a "/" and
// an "@" in it, which the driver's own parse errors quote in part.
func TestNeverPrintsTheDSNPassword(t *testing.T) {
	const password = "s3cr3tA/p4ssB@w0rdC"
	bin := filepath.Join(t.TempDir(), "quickstart")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	for _, tc := range []struct {
		name string
		env  string
		args []string
	}{
		{"usage", "MYSQL_DSN=app:" + password + "@tcp(127.0.0.1:1)/", []string{"-h"}},
		{"bad flag", "MYSQL_DSN=app:" + password + "@tcp(127.0.0.1:1)/", []string{"-bogus"}},
		{"no server", "MYSQL_DSN=app:" + password + "@tcp(127.0.0.1:1)/", nil},
		{"no slash before the database", "", []string{"-dsn", "app:" + password + "@tcp(127.0.0.1:1)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(os.Environ(), tc.env)
			out, err := cmd.CombinedOutput()
			if tc.name != "usage" {
				require.Error(t, err, "it cannot connect: %s", out)
			}
			for _, part := range strings.FieldsFunc(password, func(r rune) bool { return r == '/' || r == '@' }) {
				require.NotContains(t, string(out), part)
			}
		})
	}
}
