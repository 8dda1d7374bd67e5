package uitest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver internal/pgtest opens its pools with
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/outbox/outboxui"
)

var screenshots = flag.String("screenshots", os.Getenv("OUTBOXUI_SCREENSHOTS"), "directory to write docs/dashboard.md's screenshots to (default: none written)")

func TestMain(m *testing.M) {
	flag.Parse()
	code := testutil.Main(m)
	if err := pgtest.StopContainer(); err != nil {
		fmt.Fprintf(os.Stderr, "terminate the PostgreSQL test container: %v\n", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// The payload of the dead letter: markup that must show as text.
const scriptPayload = `{"room_id":"room-gone","html":"<script>alert(1)</script>","img":"\"'><img src=x onerror=alert(2)>"}`

// chromium finds the browser: CHROMIUM_PATH, else chromium on the PATH.
// Without one the test fails, unless OUTBOXUI_SKIP_BROWSER=1 asks for a
// skip.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("OUTBOXUI_SKIP_BROWSER") == "1" {
		t.Skip("no chromium, and OUTBOXUI_SKIP_BROWSER=1")
	}
	t.Fatal("no chromium on the PATH: apt-get install chromium, set CHROMIUM_PATH, or set OUTBOXUI_SKIP_BROWSER=1 to skip")
	return ""
}

// gatedSink publishes once its gate is open; messages of type
// "RoomGiftSent" fail for good (dead letters), of type "RoomUserJoined"
// fail for now (retried).
type gatedSink struct {
	open chan struct{}
}

func (s *gatedSink) Publish(ctx context.Context, m outbox.Message) error {
	select {
	case <-s.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	switch m.Type {
	case "RoomGiftSent":
		return outbox.Permanent(errors.New(`tencent im: ErrorCode 10010: group gone "'><img src=x onerror=alert(3)>`))
	case "RoomUserJoined":
		return errors.New("tencent im: ErrorCode 90994: service timeout, retrying")
	}
	return nil
}

// browser starts a headless chromium with a deadline, and extra options
// of its own; the cleanup kills it. Any dialog (alert) a page opens is a
// failure: a value from the database ran as script. It is closed, so the
// test goes on to report.
func browser(t *testing.T, width, height int, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.WindowSize(width, height))
	opts = append(opts, extra...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			t.Errorf("a dialog opened: %q: a value from the database ran as script", ev.Message)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
		cancelAlloc() // kills the browser and waits for it
		<-watched
	})
	return ctx
}

// waitText polls the text of sel until want(text) holds, or the
// browser's deadline passes.
func waitText(t *testing.T, ctx context.Context, sel string, what string, want func(string) bool) string {
	t.Helper()
	return waitFor(t, ctx, what, chromedp.Text(chromedp.CSS(sel)), want)
}

// waitFor runs action until want(its result) holds, or the browser's
// deadline passes.
func waitFor[T any](t *testing.T, ctx context.Context, what string, action chromedp.Action[T], want func(T) bool) T {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		try, cancel := context.WithTimeout(ctx, 2*time.Second)
		v, err := chromedp.Run(try, action)
		cancel()
		if err == nil && want(v) {
			t.Logf("%s: %v", what, v)
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: got %v (last error %v)", what, v, err)
		case <-tick.C:
		}
	}
}

// waitLoaded waits until the page in the browser has loaded whole.
func waitLoaded(t *testing.T, ctx context.Context) {
	t.Helper()
	waitFor(t, ctx, "the page loaded", chromedp.Evaluate[string](`document.readyState`), equals("complete"))
}

func equals(want string) func(string) bool {
	return func(s string) bool { return strings.TrimSpace(s) == want }
}

// screenshot writes the page to -screenshots/name, if asked.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if *screenshots == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(*screenshots, 0o755))
	path := filepath.Join(*screenshots, name)
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// TestDashboardInABrowser is the acceptance test of the dashboard: the
// overview follows the outbox live, a dead letter is found by filter and
// requeued through the page (checked in the database), and a <script>
// payload shows as text.
func TestDashboardInABrowser(t *testing.T) {
	forEachStore(t, dashboardInABrowser)
}

func dashboardInABrowser(t *testing.T, kind storeKind) {
	store, db := kind.open(t, "room_outbox")
	bg := context.Background()
	require.NoError(t, store.AddConsumer(bg, "activity", backend.StartNow))

	ui, err := outboxui.New(outboxui.Options{
		Outboxes: []outboxui.Outbox{store}, Refresh: 500 * time.Millisecond,
		SampleInterval: time.Second, Logger: outboxtest.Logger(t),
	})
	require.NoError(t, err)
	srv := httptest.NewServer(ui)
	t.Cleanup(func() { srv.Close(); _ = ui.Close() })

	sink := &gatedSink{open: make(chan struct{})}
	w, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{PollInterval: 50 * time.Millisecond, Logger: outboxtest.Logger(t)})
	require.NoError(t, err)
	wctx, stopWorker := context.WithCancel(bg)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = w.Run(wctx) }()
	stop := sync.OnceFunc(func() { stopWorker(); wg.Wait() }) // a held publish ends at its PublishTimeout
	t.Cleanup(stop)

	ctx := browser(t, 1280, 900)
	pending := `[data-q="room_outbox/"] [data-f="pending"]`
	dead := `[data-q="room_outbox/"] [data-f="dead"]`
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(pending))))
	waitText(t, ctx, pending, "empty outbox", equals("0"))

	// Messages written while the sink is held show up as pending, live.
	var msgs []outbox.Message
	for i := range 4 {
		msgs = append(msgs, outbox.Message{ID: fmt.Sprintf("join-%d", i), Key: fmt.Sprintf("room-%d", i), Type: "RoomCreated", Payload: []byte(`{"ok":true}`)})
	}
	require.NoError(t, store.Enqueue(bg, db, nil, msgs...))
	waitText(t, ctx, pending, "written, not yet delivered", equals("4"))

	// Let the sink go: they are published; then a dead letter and a
	// failing record arrive.
	close(sink.open)
	waitText(t, ctx, pending, "delivered", equals("0"))
	require.NoError(t, store.Enqueue(bg, db, nil,
		outbox.Message{ID: "gift-7f3a", Key: "room-gone", Type: "RoomGiftSent", Payload: []byte(scriptPayload), Headers: map[string]string{"request_id": "req-<b>42</b>"}},
		outbox.Message{ID: "join-9c1e", Key: "room-7", Type: "RoomUserJoined", Payload: []byte(`{"room_id":"room-7","user_id":"bob"}`)},
	))
	waitText(t, ctx, dead, "the dead letter", equals("1"))
	waitText(t, ctx, `[data-q="room_outbox/"] [data-f="head-error"]`, "the failing head's last error", func(s string) bool { return strings.Contains(s, "90994") })
	waitText(t, ctx, `[data-q="room_outbox/"] [data-f="done"]`, "a throughput", func(s string) bool { return strings.HasSuffix(s, "/min") })
	waitFor(t, ctx, "a sparkline of a few samples", chromedp.Evaluate[int](`document.querySelector('[data-q="room_outbox/"] [data-f="spark"]').points.numberOfItems`),
		func(n int) bool { return n >= 4 })
	kind.screenshot(t, ctx, "overview.png")

	// Find the dead letter by its error text. The unfiltered list shows
	// its link too: wait for the filtered page itself (its address), and
	// for it to be whole, before looking at it.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-q="room_outbox/"] .links a`)),
		chromedp.WaitVisible(chromedp.CSS(`#f-error`)),
		chromedp.SendKeys(chromedp.CSS(`#f-error`), "group gone"),
		chromedp.Click(chromedp.CSS(`#apply`)),
	))
	waitFor(t, ctx, "the filtered list", chromedp.Location(), func(u string) bool { return strings.Contains(u, "error=group+gone") })
	waitLoaded(t, ctx)
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`a[href*="id=gift-7f3a"]`))))
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("table.records tbody tr").length`))
	require.NoError(t, err)
	require.Equal(t, 1, rows, "the filter finds the one dead letter")

	// Its page shows the payload as text.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`a[href*="id=gift-7f3a"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#payload`)),
	))
	waitLoaded(t, ctx) // every element is there to be counted
	payload, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#payload`)))
	require.NoError(t, err)
	scripts, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("script").length + document.querySelectorAll("img").length`))
	require.NoError(t, err)
	require.Contains(t, payload, `"html": "<script>alert(1)</script>"`, "the payload, indented, as text")
	require.Contains(t, payload, `<img src=x onerror=alert(2)>`)
	require.Equal(t, 1, scripts, "no element from the payload, the error or the headers: only the page's own script")
	kind.screenshot(t, ctx, "dead-letter.png")

	// Requeue it through the page: the worker is stopped first, so that
	// the database shows the record pending, not retried again.
	stop()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`button.requeue-one`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
	))
	question, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`h1`)))
	require.NoError(t, err)
	require.Equal(t, "Requeue 1 dead letter?", strings.TrimSpace(question))
	rec, err := store.Get(bg, "gift-7f3a")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusDead, rec.Status, "asking changes nothing")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#confirm`)), chromedp.WaitVisible(chromedp.CSS(`#flash`))))
	waitText(t, ctx, `#flash`, "the result", func(s string) bool { return strings.HasPrefix(s, "Requeued 1 dead letter(s)") })
	rec, err = store.Get(bg, "gift-7f3a")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPending, rec.Status, "pending again, in the database")
	require.Zero(t, rec.Attempts)

	// A narrow window: nothing wider than the screen.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(380, 800),
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(pending)),
	))
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
	require.NoError(t, err)
	require.False(t, overflow, "the overview fits a narrow window")
}
