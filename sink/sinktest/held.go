package sinktest

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// waitHeld polls tg.Received until every message of want is held, and
// returns what was held then. It fails once waitTimeout has passed,
// saying what is missing and the last error of Received, if any.
func waitHeld(tg Target, want []outbox.Message) ([]Delivery, error) {
	var (
		got     []Delivery
		missing []string
		lastErr error
	)
	ok := poll(waitTimeout, func() bool {
		ds, err := tg.Received()
		if err != nil {
			lastErr = err
			return false
		}
		got, missing = ds, nil
		held := idSet(ds)
		for _, m := range want {
			if !held[m.ID] {
				missing = append(missing, m.ID)
			}
		}
		return len(missing) == 0
	})
	if ok {
		return got, nil
	}
	text := fmt.Sprintf("after %v the peer holds %d messages, and not %d of those published (%s)",
		waitTimeout, len(got), len(missing), quoteSome(missing))
	if lastErr != nil {
		text += fmt.Sprintf("; Received last failed with: %v", lastErr)
	}
	return got, fmt.Errorf("%s", text)
}

// poll calls cond, at growing intervals of up to 100ms, until it holds
// (true) or limit has passed (false).
func poll(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	wait := 2 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
	return true
}

func idSet(ds []Delivery) map[string]bool {
	set := make(map[string]bool, len(ds))
	for _, d := range ds {
		set[d.ID] = true
	}
	return set
}

// checkHeld checks every delivery of a message of sent against it, and
// that the peer holds nothing else but messages of tried (published
// with an error): no message split in two, no header that turned into
// a message.
func (s *suite) checkHeld(ds []Delivery, sent, tried []outbox.Message) error {
	byID := make(map[string]outbox.Message, len(sent))
	for _, m := range sent {
		byID[m.ID] = m
	}
	for _, d := range ds {
		m, ok := byID[d.ID]
		if !ok {
			if slices.ContainsFunc(tried, func(m outbox.Message) bool { return m.ID == d.ID }) {
				continue
			}
			return fmt.Errorf("the peer holds a message with ID %s that was never published", quote(d.ID))
		}
		if diff := s.diff(m, d); diff != "" {
			return fmt.Errorf("message %s arrived changed: %s", quote(m.ID), diff)
		}
	}
	return nil
}

// diff describes the first difference between m and its delivery d, or
// returns "".
func (s *suite) diff(m outbox.Message, d Delivery) string {
	switch {
	case d.Key != m.Key:
		return fmt.Sprintf("Key %s, published as %s", quote(d.Key), quote(m.Key))
	case d.Type != m.Type:
		return fmt.Sprintf("Type %s, published as %s", quote(d.Type), quote(m.Type))
	case !bytes.Equal(d.Payload, m.Payload):
		return fmt.Sprintf("Payload of %d bytes %s, published as %d bytes %s",
			len(d.Payload), quote(string(d.Payload)), len(m.Payload), quote(string(m.Payload)))
	case s.KeepsHeaders && !sameHeaders(m.Headers, d.Headers):
		return fmt.Sprintf("Headers %s, published as %s", quoteHeaders(d.Headers), quoteHeaders(m.Headers))
	}
	return ""
}

// sameHeaders reports whether got holds the headers of want: the same
// names and values, or, where the peer folds the case of names (HTTP),
// names that differ only in case, as long as no two of want's names do.
func sameHeaders(want, got map[string]string) bool {
	if len(want) != len(got) {
		return false
	}
	if maps.Equal(want, got) {
		return true
	}
	lower := func(h map[string]string) map[string]string {
		out := make(map[string]string, len(h))
		for k, v := range h {
			out[strings.ToLower(k)] = v
		}
		return out
	}
	w := lower(want)
	return len(w) == len(want) && maps.Equal(w, lower(got))
}

// firstOrder returns, for each key, the IDs of ds in the order of their
// first delivery.
func firstOrder(ds []Delivery) map[string][]string {
	seen := map[string]bool{}
	out := map[string][]string{}
	for _, d := range ds {
		if seen[d.ID] {
			continue
		}
		seen[d.ID] = true
		out[d.Key] = append(out[d.Key], d.ID)
	}
	return out
}

// checkOrder checks that, for each key of sent, the peer holds the
// messages of sent in the order of sent (by first delivery).
func checkOrder(ds []Delivery, sent []outbox.Message) error {
	want := map[string][]string{}
	published := map[string]bool{}
	for _, m := range sent {
		want[m.Key] = append(want[m.Key], m.ID)
		published[m.ID] = true
	}
	got := firstOrder(slices.DeleteFunc(slices.Clone(ds), func(d Delivery) bool { return !published[d.ID] }))
	for _, key := range slices.Sorted(maps.Keys(want)) {
		if !slices.Equal(got[key], want[key]) {
			return fmt.Errorf("key %s: the peer holds %s, published in the order %s", quote(key), quoteSome(got[key]), quoteSome(want[key]))
		}
	}
	return nil
}

// quote is s quoted, cut to 64 characters: enough to recognise in a
// failure.
func quote(s string) string {
	if utf8.RuneCountInString(s) <= 64 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%.64q… (%d bytes)", s, len(s))
}

// cut is a text from a sink cut to 300 bytes, for a failure message.
func cut(s string) string {
	if len(s) <= 300 {
		return s
	}
	return s[:300] + "…"
}

// quoteSome quotes the first few of ids.
func quoteSome(ids []string) string {
	const n = 5
	parts := make([]string, 0, n+1)
	for i, id := range ids {
		if i == n {
			parts = append(parts, fmt.Sprintf("… %d in all", len(ids)))
			break
		}
		parts = append(parts, quote(id))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func quoteHeaders(h map[string]string) string {
	parts := make([]string, 0, len(h))
	for _, k := range slices.Sorted(maps.Keys(h)) {
		parts = append(parts, quote(k)+":"+quote(h[k]))
		if len(parts) == 6 {
			parts = append(parts, fmt.Sprintf("… %d in all", len(h)))
			break
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}
