package sinkerr

import (
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	l := Layout{Prefix: "kafka", Dest: "topic", Quote: strconv.Quote}
	for _, c := range []struct {
		class, detail, id, dest, want string
	}{
		{"sink closed", "kafka: sink closed", "e-1", "rooms", `kafka: sink closed: kafka: sink closed (event "e-1", topic "rooms")`},
		{"message cannot be sent as stored", "", "e-1", "", `kafka: message cannot be sent as stored (event "e-1")`},
	} {
		if got := l.Text(c.class, c.detail, c.id, c.dest); got != c.want {
			t.Errorf("Text: %s, want %s", got, c.want)
		}
	}
}

func TestError(t *testing.T) {
	sentinel := errors.New("sink: unsendable")
	e := &Error{Text: "sink: unsendable (event \"e-1\")", Sentinel: sentinel, Cause: io.ErrUnexpectedEOF}
	if !errors.Is(e, sentinel) || !errors.Is(e, io.ErrUnexpectedEOF) || errors.Is(e, os.ErrClosed) {
		t.Errorf("errors.Is: the sentinel and the cause only")
	}
	if errors.Is(&Error{Text: "x"}, nil) {
		t.Errorf("an Error without a sentinel matches nil")
	}
	if e.Error() != e.Text {
		t.Errorf("Error: %q", e.Error())
	}
}

func TestQuote(t *testing.T) {
	if got := Quote("a\x00b"); got != `"a\x00b"` {
		t.Errorf("Quote: %s", got)
	}
	long := strings.Repeat("x", 100)
	if got := Quote(long); got != strconv.Quote(long[:64])+"…" {
		t.Errorf("Quote of 100 bytes: %s", got)
	}
}
