// Package outboxui is an operator's dashboard for outboxes: an
// http.Handler that a service mounts on its admin listener (and that
// `outboxctl ui` serves alone on loopback).
//
// The overview shows every outbox and every named consumer, the worst
// first: the age of the oldest pending record, in large type, then the
// pending, leased and dead counts, the record stuck at the head (its
// type, key, attempts and last error, with a link to it), and the
// throughput of the last minutes. It refreshes itself without reloading.
// The records pages list dead letters, failing records (pending with
// attempts) or all pending ones, filtered by type, key, error text and
// age, a page at a time by the store's sequence (never OFFSET). A record
// page shows the payload (indented if it is JSON, bounded), the headers,
// the times, and the message's state in every consumer. Dead letters are
// requeued one at a time, by selection, or all that a filter matches,
// after a confirmation page that shows the count.
//
// Safety: the handler answers only to loopback (localhost, 127.0.0.0/8,
// ::1) and to the names in Options.AllowedHosts: a request with another
// Host header gets 421 Misdirected Request, so that a web page cannot
// reach the dashboard by resolving a name of its own to its address (DNS
// rebinding). Every value from the database is escaped by html/template,
// with control characters and invalid UTF-8 shown escaped. Actions are
// POSTs that carry a per-session CSRF token (an HMAC of a random session
// cookie) and must come from the same origin; Options.ReadOnly switches
// them off. Options.Authorize checks every request. Every response
// carries a strict Content-Security-Policy (the script and styles are
// embedded and served by the handler, nothing comes from elsewhere),
// X-Content-Type-Options and Referrer-Policy.
//
// The handler reads and requeues through the operator contract of
// outbox/backend only (Outbox and Queue are backend's): a *mysql.Store of
// store/mysql is an Outbox, its ConsumerStores are Queues, and any other
// store that passes backendtest.RunOperatorTests works the same. Throughput comes from sampling each
// queue's Stats and the outbox's LastSeq every Options.SampleInterval in
// a goroutine that the first request starts and Close stops (so a handler
// nobody opens costs nothing).
//
//	ui, err := outboxui.New(outboxui.Options{
//		Outboxes: []outboxui.Outbox{store}, // a *mysql.Store, say
//		Path:     "/outbox/",
//	})
//	if err != nil { … }
//	defer ui.Close()
//	adminMux.Handle("/outbox/", ui)
package outboxui
