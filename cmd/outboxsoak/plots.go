package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// series is one line of a plot.
type series struct {
	name string
	xy   plotter.XYs
}

// mark is a moment marked on a plot's time axis with a vertical line:
// the end of the warm-up, the writers' stop, a fault.
type mark struct {
	T     float64 // seconds since the writers started
	Label string
	Fault bool
	End   bool // a fault's end: dashed, no label
}

// chart is one plot of the report: a file name (without its extension), a title, the y axis,
// and how to read its lines from the samples.
type chart struct {
	file, title, yLabel string
	logY                bool
	lines               func(ss []sample) []series
}

// drawCharts draws every chart of the summary in dir, as SVG or PNG
// (Config.PlotFormat), and returns those it drew, in order.
func drawCharts(dir string, sum *summary) ([]chart, error) {
	var drawn []chart
	for _, c := range charts(sum) {
		lines := c.lines(sum.Samples)
		lines = slices.DeleteFunc(lines, func(s series) bool { return len(s.xy) == 0 })
		if len(lines) == 0 {
			continue // nothing measured: a figure this server does not have
		}
		c.file += "." + sum.Config.PlotFormat
		if err := drawChart(filepath.Join(dir, c.file), c, lines, sum.marks()); err != nil {
			return drawn, fmt.Errorf("%s: %w", c.file, err)
		}
		drawn = append(drawn, c)
	}
	return drawn, nil
}

// drawChart draws one chart to path.
func drawChart(path string, c chart, lines []series, marks []mark) error {
	p := plot.New()
	p.Title.Text = c.title
	p.X.Label.Text = "seconds since the writers started"
	p.Y.Label.Text = c.yLabel
	p.Legend.Top = true
	p.Legend.Left = true
	if c.logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Add(plotter.NewGrid())
	args := make([]any, 0, 2*len(lines))
	for _, s := range lines {
		args = append(args, s.name, s.xy)
	}
	if err := plotutil.AddLines(p, args...); err != nil {
		return err
	}
	if !c.logY && p.Y.Min > 0 {
		p.Y.Min = 0 // a count or a size starts from nothing
	}
	if err := addMarks(p, marks); err != nil {
		return err
	}
	return p.Save(10*vg.Inch, 3.6*vg.Inch, path)
}

// addMarks draws each mark as a vertical line across the plot's data,
// labelled at its top.
func addMarks(p *plot.Plot, marks []mark) error {
	lo, hi := p.Y.Min, p.Y.Max
	if lo == hi {
		hi = lo + 1
	}
	labels := plotter.XYLabels{}
	for _, m := range marks {
		l, err := plotter.NewLine(plotter.XYs{{X: m.T, Y: lo}, {X: m.T, Y: hi}})
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 150}
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(3)}
		if m.Fault {
			l.Color = color.RGBA{R: 200, A: 255}
			if !m.End {
				l.Dashes = nil
			}
		}
		p.Add(l)
		if m.Label == "" {
			continue
		}
		labels.XYs = append(labels.XYs, plotter.XY{X: m.T, Y: hi})
		labels.Labels = append(labels.Labels, " "+m.Label)
	}
	if len(labels.XYs) == 0 {
		return nil
	}
	ls, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	for i := range ls.TextStyle {
		ls.TextStyle[i].Color = color.Gray{Y: 90}
		ls.TextStyle[i].YAlign = text.YTop
	}
	p.Add(ls)
	return nil
}

// perConsumer returns a line per consumer of the value f reads from its
// sample, leaving out samples where ok is false.
func perConsumer(ss []sample, names []string, suffix string, f func(c consumerSample) (float64, bool)) []series {
	var out []series
	for _, name := range names {
		s := series{name: name + suffix}
		for _, smp := range ss {
			c, found := smp.Consumers[name]
			if v, ok := f(c); found && ok {
				s.xy = append(s.xy, plotter.XY{X: smp.T, Y: v})
			}
		}
		out = append(out, s)
	}
	return out
}

// perWorker returns a line per worker slot of the value f reads from its
// report.
func perWorker(ss []sample, f func(w workerSample) float64) []series {
	bySlot := map[int]*series{}
	var slots []int
	for _, smp := range ss {
		for _, w := range smp.Workers {
			s := bySlot[w.Slot]
			if s == nil {
				s = &series{name: fmt.Sprintf("worker %d", w.Slot)}
				bySlot[w.Slot] = s
				slots = append(slots, w.Slot)
			}
			s.xy = append(s.xy, plotter.XY{X: smp.T, Y: f(w)})
		}
	}
	slices.Sort(slots)
	out := make([]series, 0, len(slots))
	for _, slot := range slots {
		out = append(out, *bySlot[slot])
	}
	return out
}

// perTable returns a line per table of the value f reads from the
// server's figures, leaving out negative ones.
func perTable(ss []sample, f func(t tableFigures) float64) []series {
	byName := map[string]*series{}
	var names []string
	for _, smp := range ss {
		if smp.Server == nil {
			continue
		}
		for name, t := range smp.Server.Tables {
			v := f(t)
			if v < 0 {
				continue
			}
			s := byName[name]
			if s == nil {
				s = &series{name: name}
				byName[name] = s
				names = append(names, name)
			}
			s.xy = append(s.xy, plotter.XY{X: smp.T, Y: v})
		}
	}
	slices.Sort(names)
	out := make([]series, 0, len(names))
	for _, name := range names {
		out = append(out, *byName[name])
	}
	return out
}

// one returns a single line of the value f reads from each sample,
// leaving out samples where ok is false.
func one(ss []sample, name string, f func(s sample) (float64, bool)) series {
	s := series{name: name}
	for _, smp := range ss {
		if v, ok := f(smp); ok {
			s.xy = append(s.xy, plotter.XY{X: smp.T, Y: v})
		}
	}
	return s
}

const mib = 1 << 20

// charts are the report's plots.
func charts(sum *summary) []chart {
	names := sum.Config.consumers()
	return []chart{
		{file: "throughput", title: "Throughput", yLabel: "events/s", lines: func(ss []sample) []series {
			enq := one(ss, "enqueued", func(s sample) (float64, bool) { return s.EnqueuePerS, true })
			return append([]series{enq}, perConsumer(ss, names, " delivered", func(c consumerSample) (float64, bool) { return c.DeliveredPerS, true })...)
		}},
		{file: "lag", title: "Lag from the write to the sink, per sampling interval", yLabel: "ms (log)", logY: true, lines: func(ss []sample) []series {
			lag := func(q func(l lagFigures) float64) func(c consumerSample) (float64, bool) {
				return func(c consumerSample) (float64, bool) { return q(c.Lag), c.Lag.Count > 0 && q(c.Lag) > 0 }
			}
			return append(perConsumer(ss, names, " p50", lag(func(l lagFigures) float64 { return l.P50Ms })),
				perConsumer(ss, names, " p99", lag(func(l lagFigures) float64 { return l.P99Ms }))...)
		}},
		{file: "write-latency", title: "Writer.Do: the transaction and the after-commit publish", yLabel: "ms (log)", logY: true, lines: func(ss []sample) []series {
			q := func(name string, f func(l lagFigures) float64) series {
				return one(ss, name, func(s sample) (float64, bool) {
					return f(s.WriteLatency), s.WriteLatency.Count > 0 && f(s.WriteLatency) > 0
				})
			}
			return []series{q("p50", func(l lagFigures) float64 { return l.P50Ms }), q("p99", func(l lagFigures) float64 { return l.P99Ms })}
		}},
		{file: "backlog", title: "Backlog: pending records (Stats)", yLabel: "records", lines: func(ss []sample) []series {
			return perConsumer(ss, names, "", func(c consumerSample) (float64, bool) { return float64(c.Pending), c.Pending >= 0 })
		}},
		{file: "oldest", title: "Oldest pending record's age (Stats)", yLabel: "seconds", lines: func(ss []sample) []series {
			return perConsumer(ss, names, "", func(c consumerSample) (float64, bool) { return c.OldestPendingS, c.OldestPendingS >= 0 })
		}},
		{file: "rss", title: "Worker processes' RSS", yLabel: "MiB", lines: func(ss []sample) []series {
			return perWorker(ss, func(w workerSample) float64 { return float64(w.RSSBytes) / mib })
		}},
		{file: "heap", title: "Worker processes' Go heap (HeapAlloc)", yLabel: "MiB", lines: func(ss []sample) []series {
			return perWorker(ss, func(w workerSample) float64 { return float64(w.HeapBytes) / mib })
		}},
		{file: "goroutines", title: "Worker processes' goroutines", yLabel: "goroutines", lines: func(ss []sample) []series {
			return perWorker(ss, func(w workerSample) float64 { return float64(w.Goroutines) })
		}},
		{file: "connections", title: "Database connections", yLabel: "connections", lines: func(ss []sample) []series {
			return []series{
				one(ss, "client pools (writer + workers)", func(s sample) (float64, bool) { return float64(s.ClientConns), true }),
				one(ss, "server sessions on the database", func(s sample) (float64, bool) {
					return serverValue(s, func(f *serverFigures) float64 { return float64(f.Connections) })
				}),
			}
		}},
		{file: "tables", title: "Table size: data + indexes", yLabel: "MiB", lines: func(ss []sample) []series {
			return perTable(ss, func(t tableFigures) float64 { return float64(t.DataBytes+t.IndexBytes) / mib })
		}},
		{file: "dead-tuples", title: "Dead tuples (PostgreSQL)", yLabel: "tuples", lines: func(ss []sample) []series {
			return perTable(ss, func(t tableFigures) float64 { return float64(t.DeadTuples) })
		}},
		{file: "history", title: "InnoDB history list length (server-wide)", yLabel: "undo log units", lines: func(ss []sample) []series {
			return []series{one(ss, "history list length", func(s sample) (float64, bool) {
				return serverValue(s, func(f *serverFigures) float64 { return float64(f.HistoryLength) })
			})}
		}},
	}
}

// serverValue reads a server figure of s, false if there is none.
func serverValue(s sample, f func(*serverFigures) float64) (float64, bool) {
	if s.Server == nil {
		return 0, false
	}
	v := f(s.Server)
	return v, v >= 0 && !math.IsNaN(v)
}
