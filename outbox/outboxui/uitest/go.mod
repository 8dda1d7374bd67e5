module github.com/outboxrelay/outboxrelay/outbox/outboxui/uitest

go 1.26.0

// A module of its own, so that the root module does not require chromedp:
// only this browser test of outboxui does.
require github.com/outboxrelay/outboxrelay v0.1.0

require (
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/stretchr/testify v1.12.1
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)

replace github.com/outboxrelay/outboxrelay => ../../..
