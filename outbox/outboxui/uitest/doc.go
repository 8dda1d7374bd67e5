// Package uitest drives outboxui in a real browser (Debian's chromium,
// through chromedp) against a real store on MySQL/MariaDB. It is a module
// of its own so that the root module does not depend on chromedp.
//
//	OUTBOXRELAY_TEST_MYSQL_DSN='root@tcp(127.0.0.1:3306)/' go test -race ./outbox/outboxui/uitest/...
//
// The test fails when no chromium is found (CHROMIUM_PATH names one
// elsewhere); OUTBOXUI_SKIP_BROWSER=1 skips it instead, for machines
// without a browser. -screenshots DIR (or OUTBOXUI_SCREENSHOTS=DIR)
// writes overview.png and dead-letter.png there, for docs/dashboard.md.
package uitest
