package svckit

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNATSURLs(t *testing.T) {
	for _, c := range []struct{ list, redacted string }{
		{"nats://nats:4222", "nats://nats:4222"},
		{"nats://user:pa55@nats:4222", "nats://[redacted]@nats:4222"},
		{"nats://t0ken@a:4222, tls://b:4222", "nats://[redacted]@a:4222,tls://b:4222"},
		{"wss://u:p@h/ws", "wss://[redacted]@h/ws"},
	} {
		_, err := NATSURLs(c.list)
		require.NoError(t, err, c.list)
		require.Equal(t, c.redacted, RedactNATSURL(c.list))
	}
	require.Equal(t, []string{"pa55", "t0ken"}, NATSSecrets("nats://user:pa55@a:1,nats://t0ken@b:2,nats://c:3"))
	for _, bad := range []string{"nats:4222", "http://nats:4222", "nats://a:1,", "nats://user:pa/ss@h:1 x"} {
		_, err := NATSURLs(bad)
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), "pa/ss")
		require.Equal(t, "(a URL that does not parse)", RedactNATSURL(bad))
	}
	require.Empty(t, RedactNATSURL(""))
}

func TestRedactDSN(t *testing.T) {
	require.Equal(t, "app:[redacted]@tcp(db:3306)/x", RedactDSN("app:s3cret@tcp(db:3306)/x"))
	require.Equal(t, "(a DSN that does not parse)", RedactDSN("s3cret"))
	require.Empty(t, RedactDSN(""))
}

func TestNewEventID(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	a, b := NewEventID(now), NewEventID(now)
	require.Regexp(t, regexp.MustCompile(`^018bcfe5-687b-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`), a, "UUIDv7 with the time in front")
	require.NotEqual(t, a, b)
}

func TestOrDefault(t *testing.T) {
	n, s := 0, "set"
	OrDefault(&n, 5)
	OrDefault(&s, "default")
	require.Equal(t, 5, n)
	require.Equal(t, "set", s)
}
