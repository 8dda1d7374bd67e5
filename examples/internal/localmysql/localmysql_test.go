package localmysql

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

func TestChoose(t *testing.T) {
	for _, c := range []struct{ flag, env, want string }{
		{"", "", DefaultDSN},
		{"", "u@tcp(db:3306)/", "u@tcp(db:3306)/"},
		{"f@tcp(x:1)/", "u@tcp(db:3306)/", "f@tcp(x:1)/"},
	} {
		t.Setenv(EnvDSN, c.env)
		require.Equal(t, c.want, Choose(c.flag), "flag %q, %s %q", c.flag, EnvDSN, c.env)
	}
}

func TestAsk(t *testing.T) {
	srv, err := Ask(context.Background(), testutil.ServerDSN(t), 10*time.Second)
	require.NoError(t, err)
	require.NotEmpty(t, srv.Version)
	require.Contains(t, srv.String(), " at ")
}

// TestAskNoServer: a port nobody listens on answers nothing, and the
// error names the address but not the password.
func TestAskNoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, err = Ask(context.Background(), "root:s3cretPW@tcp("+addr+")/", 5*time.Second)
	require.ErrorContains(t, err, addr)
	require.False(t, strings.Contains(err.Error(), "s3cretPW"), err.Error())
}
