package uitest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/outbox/outboxui"
)

// rebindName is a name the browser resolves to 127.0.0.1, as an
// attacker's DNS would after the page loaded (DNS rebinding).
const rebindName = "rebind.attacker.example"

// deadStore is a migrated outbox table whose messages of ids are dead
// letters, and the dashboard's server for it.
func deadStore(t *testing.T, kind storeKind, ids ...string) (backend.Outbox, *httptest.Server) {
	t.Helper()
	store, db := kind.open(t, "room_outbox")
	ctx := context.Background()
	var ms []outbox.Message
	for i, id := range ids {
		ms = append(ms, outbox.Message{ID: id, Type: "RoomGiftSent", Payload: []byte(fmt.Sprintf(`{"n":%d,"secret":"payload-%d"}`, i, i))})
	}
	require.NoError(t, store.Enqueue(ctx, db, nil, ms...))
	kill(t, store, ids...)
	ui, err := outboxui.New(outboxui.Options{Outboxes: []outboxui.Outbox{store}, Logger: outboxtest.Logger(t)})
	require.NoError(t, err)
	srv := httptest.NewServer(ui)
	t.Cleanup(func() { srv.Close(); _ = ui.Close() })
	return store, srv
}

// kill makes the pending records of ids dead letters.
func kill(t *testing.T, store backend.Outbox, ids ...string) {
	t.Helper()
	ctx := context.Background()
	b, err := store.Claim(ctx, backend.ClaimParams{Owner: "test", Limit: len(ids), LeaseFor: time.Minute, IDs: ids})
	require.NoError(t, err)
	require.Len(t, b.Records, len(ids))
	var outcomes []backend.Outcome
	for _, id := range ids {
		outcomes = append(outcomes, backend.Outcome{ID: id, Kind: backend.OutcomeDead, Error: "group gone"})
	}
	_, err = store.Settle(ctx, b.Token, outcomes)
	require.NoError(t, err)
}

func requireStatus(t *testing.T, store backend.Outbox, want outbox.Status, ids ...string) {
	t.Helper()
	for _, id := range ids {
		rec, err := store.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, want, rec.Status, "%q", id)
	}
}

// TestAwkwardIDsInABrowser: dead letters whose IDs hold NUL, CR, LF,
// leading spaces, URL metacharacters or 255 multi-byte characters are
// requeued by clicking through the pages in chromium: all at once by
// selection, and one from its record page, reached by its link.
func TestAwkwardIDsInABrowser(t *testing.T) {
	forEachStore(t, awkwardIDsInABrowser)
}

func awkwardIDsInABrowser(t *testing.T, kind storeKind) {
	ids := []string{"nul\x00id", "\x00", "\uFFFD", "cr\rid", "lf\nid", "crlf\r\nid", "  leading", "a+b&c=d#e%25f%zz", `"q'<b>`,
		strings.Repeat("房", outbox.MaxIDLength)}
	if !kind.nulIDs {
		nul := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !strings.Contains(id, "\x00") })
		require.NotEmpty(t, nul)
		store, db := kind.open(t, "nul_outbox")
		for _, id := range nul {
			err := store.Enqueue(context.Background(), db, nil, outbox.Message{ID: id, Type: "RoomGiftSent"})
			require.ErrorIs(t, err, outbox.ErrInvalidMessage, "%q: refused, with a clear error", id)
		}
		ids = slices.DeleteFunc(ids, func(id string) bool { return strings.Contains(id, "\x00") })
	}
	store, srv := deadStore(t, kind, ids...)
	ctx := browser(t, 1280, 900)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/records?outbox=room_outbox&view=dead"),
		chromedp.WaitVisible(chromedp.CSS(`#requeue-selected`)),
	))
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(() => { const b = document.querySelectorAll('input[type=checkbox]'); b.forEach(c => { c.checked = true }); return b.length })()`))
	require.NoError(t, err)
	require.Equal(t, len(ids), n)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#requeue-selected`)), chromedp.WaitVisible(chromedp.CSS(`#confirm`))))
	waitText(t, ctx, `h1`, "the confirmation", equals(fmt.Sprintf("Requeue %d dead letters?", len(ids))))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#confirm`)), chromedp.WaitVisible(chromedp.CSS(`#flash`))))
	waitText(t, ctx, `#flash`, "the result", equals(fmt.Sprintf("Requeued %d dead letter(s); 0 skipped (no longer dead or gone).", len(ids))))
	requireStatus(t, store, outbox.StatusPending, ids...)

	// One by one, from the record page its link opens.
	kill(t, store, ids...)
	for _, id := range ids {
		link := "/record?" + url.Values{"outbox": {"room_outbox"}, "id": {id}}.Encode()
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Navigate(srv.URL+"/records?outbox=room_outbox&view=dead"),
			chromedp.WaitVisible(chromedp.CSS(`#requeue-selected`)),
		))
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const a = [...document.querySelectorAll('a')].find(a => a.getAttribute('href') === %q); a.click(); return true })()`, link)))
		require.NoError(t, err, "the dead letters link %s", link)
		require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`button.requeue-one`))))
		waitText(t, ctx, `#status`, "the record page of "+fmt.Sprintf("%q", id), equals("dead"))
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Click(chromedp.CSS(`button.requeue-one`)), chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
			chromedp.Click(chromedp.CSS(`#confirm`)), chromedp.WaitVisible(chromedp.CSS(`#flash`)),
		))
		waitText(t, ctx, `#flash`, fmt.Sprintf("%q requeued", id), func(s string) bool { return strings.HasPrefix(s, "Requeued 1 dead letter(s); 0 skipped") })
		requireStatus(t, store, outbox.StatusPending, id)
	}
}

// TestRebindingInABrowser: chromium resolves an attacker's name to the
// dashboard's address; a page loaded under that name is refused (421),
// and its script can neither read a record nor requeue it, while the
// same pages under 127.0.0.1 work.
func TestRebindingInABrowser(t *testing.T) {
	store, srv := deadStore(t, storeKinds[0], "gift-1")
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	ctx := browser(t, 1280, 900, chromedp.Flag("host-resolver-rules", "MAP "+rebindName+" 127.0.0.1"))

	evil := "http://" + rebindName + ":" + port
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(evil+"/record?outbox=room_outbox&id=gift-1"), chromedp.WaitReady(chromedp.CSS(`body`))))
	body, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`body`)))
	require.NoError(t, err)
	require.Contains(t, body, "421 misdirected request", "the page under the attacker's name")
	require.NotContains(t, body, "payload-0")
	// The attacker's script, same-origin with the dashboard's address now.
	attack := `fetch('/record?outbox=room_outbox&id=gift-1').then(r => r.text().then(t => r.status + ' ' + t))`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](attack, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(got, "421 "), got)
	require.NotContains(t, got, "payload-0")
	post := `fetch('/requeue', {method: 'POST', body: new URLSearchParams({outbox: 'room_outbox', scope: 'one', id: 'b64:Z2lmdC0x', confirm: 'yes'})}).then(r => r.status)`
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](post, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.Equal(t, 421, status)
	requireStatus(t, store, outbox.StatusDead, "gift-1")

	// The operator, on loopback.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/record?outbox=room_outbox&id=gift-1"), chromedp.WaitVisible(chromedp.CSS(`#payload`))))
	payload, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#payload`)))
	require.NoError(t, err)
	require.Contains(t, payload, "payload-0")
}
