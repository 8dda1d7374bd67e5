// Package uitest drives outboxui in a real browser (Debian's chromium,
// through chromedp) against real stores, on MySQL/MariaDB and on
// PostgreSQL, and checks outboxprom's metrics on each: operators see no
// difference between the stores. It is a module of its own so that the
// root module depends on neither chromedp nor pgx.
//
//	OUTBOXRELAY_TEST_MYSQL_DSN='root@tcp(127.0.0.1:3306)/' \
//	OUTBOXRELAY_TEST_POSTGRES_DSN='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' \
//	go test -race ./outbox/outboxui/uitest/...
//
// The test fails when no chromium is found (CHROMIUM_PATH names one
// elsewhere); OUTBOXUI_SKIP_BROWSER=1 skips it instead, for machines
// without a browser. -screenshots DIR (or OUTBOXUI_SCREENSHOTS=DIR)
// writes overview.png and dead-letter.png there, for docs/dashboard.md.
package uitest
