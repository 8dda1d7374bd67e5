package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestRunFlagDefaults(t *testing.T) {
	cfg, err := parseRunFlags([]string{"--driver", "mysql", "--dsn", "root@tcp(127.0.0.1:3306)/"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Rate != 200 || cfg.Duration != 15*time.Minute || cfg.Workers != 3 || cfg.Consumer != "activity" || cfg.Rooms != 200 ||
		cfg.Tuning != (tuning{}) || !strings.HasPrefix(cfg.ReportDir, "soak-mysql-") || cfg.PlotFormat != "svg" {
		t.Errorf("defaults: %+v", cfg)
	}
	t.Setenv(envDSN, "from-env")
	cfg, err = parseRunFlags([]string{"--driver", "postgres"}, io.Discard)
	if err != nil || cfg.DSN != "from-env" {
		t.Errorf("the DSN from %s: %q, %v", envDSN, cfg.DSN, err)
	}
}

// Each bad value is refused with an error that names its flag.
func TestRunFlagValidation(t *testing.T) {
	t.Setenv(envDSN, "")
	base := []string{"--driver", "mysql", "--dsn", "x"}
	cases := []struct {
		args []string
		flag string
	}{
		{[]string{"--driver", "sqlite", "--dsn", "x"}, "--driver"},
		{[]string{"--driver", "mysql"}, "DSN"},
		{append(base, "--table", "Bad-Name"), "--table"},
		{append(base, "--rate", "0"), "--rate"},
		{append(base, "--duration", "10ms"), "--duration"},
		{append(base, "--duration", "1m", "--warmup", "1m"), "--warmup"},
		{append(base, "--drain", "0s"), "--drain"},
		{append(base, "--sample", "1ms"), "--sample"},
		{append(base, "--writers", "0"), "--writers"},
		{append(base, "--events-per-tx", "0"), "--events-per-tx"},
		{append(base, "--rooms", "0"), "--rooms"},
		{append(base, "--workers", "0"), "--workers"},
		{append(base, "--consumer", "default"), "--consumer"},
		{append(base, "--consumer", "Activity"), "--consumer"},
		{append(base, "--plot-format", "pdf"), "--plot-format"},
		{append(base, "--notify-interval", "10ms"), "--notify-interval"}, // PostgreSQL only
		{[]string{"--driver", "postgres", "--dsn", "x", "--notify-interval", "2m"}, "--notify-interval"},
		{append(base, "--batch-size", "-1"), "--batch-size"},
		{append(base, "stray"), "stray"},
	}
	for _, tc := range cases {
		_, err := parseRunFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%v: error %v, want one naming %s", tc.args, err, tc.flag)
		}
	}
}

// summary.json shows durations as text, and reads back the same.
func TestConfigJSONRoundTrip(t *testing.T) {
	cfg, err := parseRunFlags([]string{"--driver", "mysql", "--dsn", "secret-dsn", "--poll-interval", "100ms", "--batch-size", "1000", "--ordering",
		"--faults", "sink-slow:2s@1m+20s,kill-worker@2m", "--seed", "7"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"duration":"15m0s"`, `"poll_interval":"100ms"`, `"batch_size":1000`, `"ordering":true`,
		`{"kind":"sink-slow","param":"2s","at":"1m0s","for":"20s"}`, `"seed":7`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	if bytes.Contains(b, []byte("secret-dsn")) {
		t.Errorf("the DSN is in %s", b)
	}
	var back config
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	back.DSN = cfg.DSN
	if !reflect.DeepEqual(back, *cfg) {
		t.Errorf("read back\n%+v\nwant\n%+v", back, *cfg)
	}
}

// Every flag of run is in outboxsoak -h and in docs/endurance.md.
func TestFlagsDocumented(t *testing.T) {
	var help bytes.Buffer
	if code := realMain([]string{"-h"}, &help, io.Discard); code != exitOK {
		t.Fatalf("-h: exit %d", code)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "endurance.md"))
	if err != nil {
		t.Fatal(err)
	}
	fs := newRunFlags(&config{}, io.Discard)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if !strings.Contains(help.String(), "-"+f.Name+" ") && !strings.Contains(help.String(), "-"+f.Name+"\n") {
			t.Errorf("outboxsoak -h does not show -%s", f.Name)
		}
		if !regexp.MustCompile(`--` + regexp.QuoteMeta(f.Name) + `\b`).Match(doc) {
			t.Errorf("docs/endurance.md does not mention --%s", f.Name)
		}
	})
	if n < 20 {
		t.Errorf("only %d flags", n)
	}
}
