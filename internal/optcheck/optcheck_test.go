package optcheck

import (
	"errors"
	"io"
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	for _, c := range []struct{ v, want time.Duration }{
		{0, time.Second},
		{-1, time.Second},
		{time.Millisecond, time.Millisecond},
	} {
		if got := Positive(c.v, time.Second); got != c.want {
			t.Errorf("Positive(%v, 1s) = %v, want %v", c.v, got, c.want)
		}
	}
}

func TestProblems(t *testing.T) {
	p := New("kafka")
	if p.Err() != nil {
		t.Fatalf("Err of no problems: %v", p.Err())
	}
	p.Addf("Topic %q: %w", "", io.ErrUnexpectedEOF)
	p.Add(nil)
	p.Add(errors.New("kafka: Seeds: required"))
	err := p.Err()
	if want := "kafka: Topic \"\": unexpected EOF\nkafka: Seeds: required"; err == nil || err.Error() != want {
		t.Fatalf("Err: %v, want %s", err, want)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Err does not wrap what Addf's %%w wrapped")
	}
	var bare Problems
	bare.Addf("jitter %v: must be 0 to 1", 2.0)
	if got := bare.Err().Error(); got != "jitter 2: must be 0 to 1" {
		t.Errorf("the zero Problems: %q", got)
	}
}
