package backendtest

import (
	"errors"
	"fmt"
	"strings"
)

// Hostile but legal inputs: what a sink, a writer or an upstream service
// may hand the outbox, which it must store, deliver or report without
// stalling, losing or leaking anything.

// HostileKeys returns message keys that stress ordering and comparison:
// control characters, leading and trailing spaces and tabs, combining
// characters, look-alikes that differ only in padding, the maximum
// length, and the empty key. Each is valid UTF-8 of at most
// outbox.MaxKeyLength characters, so outbox.Message.Validate accepts it;
// a store may still reject some with outbox.ErrInvalidMessage (it must
// then document the rule).
func HostileKeys() []string {
	return []string{
		"", "a", "a\t", "a\n", "a\x00", "a\x01", "A", "a ", " a", "\ta", "\x00", "\x01", "\x01a", "\x1f",
		"\t", " ", "  ", "\u00a0", "e\u0301", "\u00e9", "\u0301", "\u202eevil", "'; DROP TABLE x; --",
		`\`, "%", "_", "😀", strings.Repeat("😀", 255), strings.Repeat("k", 255), strings.Repeat(" ", 254) + "x",
		"order-1", "order-1 ", "order-1\t",
	}
}

// HostileTexts returns error texts a sink may produce: invalid UTF-8,
// a megabyte, NUL and other control characters, terminal escapes, and
// strings that look like secrets.
func HostileTexts() []string {
	return []string{
		"\xff\xfe\xfd",
		"upstream said: \xc3\x28 (cut in the middle of a character)",
		strings.Repeat("€", 400) + "\xe2\x82", // a cut euro sign, past the column width
		strings.Repeat("x", 1<<20),
		"nul\x00inside\x00",
		"\x1b[31mred\x1b[0m\r\nHTTP/1.1 200 OK\r\n\b\a",
		"usersig=eJwtjNEKgjAYRt9l14n8T3VSV0lJQQQV3XS3tmljuom-_AECRET&identifier=admin",
		"mysql://root:hunter2@db:3306/app password=hunter2",
		"",
		"\u2028\u2029\ufeff\ufffd",
	}
}

// hostilePanic panics with an odd value, chosen by n: nil, an error, a
// non-string, invalid UTF-8, a value whose String method panics.
func hostilePanic(n int) {
	switch n % 6 {
	case 0:
		panic(nil) // Go turns it into a *runtime.PanicNilError
	case 1:
		panic(errors.New("\xff an error value with invalid UTF-8"))
	case 2:
		panic(struct {
			Bytes []byte
			Ch    chan int
		}{Bytes: []byte{0xff, 0}})
	case 3:
		panic("\xc3\x28\x00")
	case 4:
		panic(panickyStringer{})
	default:
		panic(fmt.Sprintf("%d bytes of %s", 1<<20, strings.Repeat("\xff", 1<<20)))
	}
}

// panickyStringer fails when it is formatted.
type panickyStringer struct{}

func (panickyStringer) String() string { panic("String itself panics") }
