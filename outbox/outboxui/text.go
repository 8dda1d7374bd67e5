package outboxui

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/internal/safetext"
)

// shown is a value from the database as a page shows it on one line: cut
// to n characters, with control characters, bidirectional controls and
// invalid UTF-8 escaped. html/template escapes the markup.
func shown(s string, n int) string { return safetext.Short(s, n) }

// safeLines is shown for a block of text: newlines and tabs kept.
func safeLines(s string) string { return safetext.Escape(s, true) }

// showPayload renders a payload of up to limit bytes: indented JSON if it
// is JSON, else text, else a hex dump; note says how it was shown and
// whether it was cut.
func showPayload(p []byte, limit int) (text, note string) {
	total := len(p)
	if total == 0 {
		return "", "empty"
	}
	cut := ""
	if total > limit {
		p, cut = p[:limit], fmt.Sprintf("; showing the first %d of %d bytes", limit, total)
	}
	var pretty bytes.Buffer
	switch {
	case cut == "" && json.Valid(p) && json.Indent(&pretty, p, "", "  ") == nil:
		return safeLines(pretty.String()), fmt.Sprintf("JSON, %d bytes", total)
	case utf8.Valid(p):
		return safeLines(string(p)), fmt.Sprintf("text, %d bytes%s", total, cut)
	}
	return hex.Dump(p), fmt.Sprintf("binary, %d bytes%s", total, cut)
}

// age renders a duration for people: "-" for none.
func age(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// perMinute renders a rate.
func perMinute(r float64) string {
	if r < 10 {
		return strconv.FormatFloat(r, 'f', 1, 64) + "/min"
	}
	return strconv.FormatFloat(r, 'f', 0, 64) + "/min"
}

// sparkline returns the points of an SVG polyline of vs in a box of
// sparkWidth × sparkHeight.
func sparkline(vs []int64) string {
	if len(vs) == 0 {
		return ""
	}
	var top int64 = 1
	for _, v := range vs {
		top = max(top, v)
	}
	step := float64(sparkWidth)
	if len(vs) > 1 {
		step = float64(sparkWidth) / float64(len(vs)-1)
	}
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(' ')
		}
		y := float64(sparkHeight) - float64(v)/float64(top)*float64(sparkHeight-2) - 1
		fmt.Fprintf(&b, "%.1f,%.1f", float64(i)*step, y)
	}
	return b.String()
}

// The size of the throughput sparkline, in SVG units.
const (
	sparkWidth  = 120
	sparkHeight = 24
)

// atoi is a non-negative count from a query, 0 if it is not one.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
