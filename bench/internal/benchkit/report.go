package benchkit

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one line of a bench's report.
type Row struct {
	Scenario, Figure, Reference, Ratio, Target string
}

// PrintRows writes rows to w as a Markdown table, its columns aligned.
func PrintRows(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "| scenario\t| figure\t| reference (same run)\t| ratio\t| target\t|")
	fmt.Fprintln(tw, "| ---\t| ---\t| ---\t| ---\t| ---\t|")
	for _, r := range rows {
		fmt.Fprintf(tw, "| %s\t| %s\t| %s\t| %s\t| %s\t|\n", r.Scenario, r.Figure, r.Reference, r.Ratio, r.Target)
	}
	_ = tw.Flush()
}

// PerSec is n per second of d.
func PerSec(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// Ratio is a / b with two decimals, or "-" when b is 0.
func Ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// EvRate is a rate in events per second, as the report prints it.
func EvRate(v float64) string { return fmt.Sprintf("%.0f ev/s", v) }

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Quantile is the q quantile (0 to 1) of sorted, which is in ascending
// order; 0 when sorted is empty.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// GrowthPct is the growth from ref to v spread over added consumers:
// (v - ref) / ref / added, in percent.
func GrowthPct(v, ref float64, added int) string {
	if ref == 0 || added == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.0f%%", 100*(v-ref)/ref/float64(added))
}

// LoadAverage is the machine's load average (1, 5 and 15 minutes), or
// "?" where /proc/loadavg cannot be read.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
