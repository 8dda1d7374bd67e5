package svckit

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStreamValidate(t *testing.T) {
	require.NoError(t, Stream{Name: "ROOMS", SubjectPrefix: "rooms.eu"}.Validate("nats"))
	for _, c := range []struct {
		stream Stream
		want   string
	}{
		{Stream{Name: "A.B", SubjectPrefix: "p"}, `config: nats.stream "A.B": must be 1 to 255 characters`},
		{Stream{Name: "A\x00B", SubjectPrefix: "p"}, `config: nats.stream "A\x00B": must be`},
		{Stream{Name: "", SubjectPrefix: "p"}, `config: nats.stream "": must be`},
		{Stream{Name: string(make([]byte, 256)), SubjectPrefix: "p"}, "config: nats.stream"},
		{Stream{Name: "S", SubjectPrefix: "p.*"}, `config: nats.subject_prefix: natsjs: Prefix "p.*": must be a subject`},
	} {
		err := c.stream.Validate("nats")
		require.ErrorContains(t, err, c.want)
	}
	require.EqualError(t, ValidName("rooms.durable", "a b"),
		`config: rooms.durable "a b": must be 1 to 255 characters without spaces, control characters, '.', '*', '>', '/' or '\'`)
}
