package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// newReceiverClient returns the HTTP client of a process's sinks: kept-
// alive connections, enough of them for every worker and writer.
func newReceiverClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}
}

// receiverSink is the sink of consumer's workers: it posts each message
// to the receiver at base, and counts 204 as delivered. A 400 (the
// receiver could not book it) is permanent: retrying cannot help, and the
// message then shows as dead, so lost, in the verdict.
func receiverSink(client *http.Client, base, consumer string) outbox.Sink {
	target := base + pathDeliver + url.PathEscape(consumer)
	return outbox.SinkFunc(func(ctx context.Context, m outbox.Message) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(m.Payload))
		if err != nil {
			return outbox.Permanent(fmt.Errorf("receiver: %w", err))
		}
		req.Header.Set(headerEventID, m.ID)
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("receiver: %w", err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		switch resp.StatusCode {
		case http.StatusNoContent:
			return nil
		case http.StatusBadRequest:
			return outbox.Permanent(fmt.Errorf("receiver: %s: %s", resp.Status, strings.TrimSpace(string(msg))))
		}
		return fmt.Errorf("receiver: %s", resp.Status)
	})
}

// reportStatus posts the process's status to the receiver at base every
// interval until ctx ends. Failures are ignored: the receiver may be
// down on purpose, and the next report will do.
func reportStatus(ctx context.Context, client *http.Client, base string, slot int, db *sql.DB, every time.Duration) {
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		st := ownStatus(slot, db)
		body, _ := json.Marshal(st)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+pathStatus, bytes.NewReader(body))
		if err == nil {
			if resp, err := client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// ownStatus measures this process.
func ownStatus(slot int, db *sql.DB) workerStatus {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	dbs := db.Stats()
	return workerStatus{Slot: slot, PID: os.Getpid(), RSSBytes: readRSS(), HeapBytes: m.HeapAlloc,
		Goroutines: runtime.NumGoroutine(), DBOpen: dbs.OpenConnections, DBInUse: dbs.InUse}
}

// readRSS returns the process's resident set size, from /proc on Linux;
// 0 where there is no /proc.
func readRSS() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}
