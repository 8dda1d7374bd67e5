module github.com/outboxrelay/outboxrelay/cmd/outboxsoak

go 1.26.0

// A module of its own, as cmd/outboxctl is: the soak program needs both
// stores' drivers and a plotting library, which no user of the library
// should find in their go list -m all. It uses only the library's public
// API (outbox, outbox/backend, store/mysql, store/postgres), so that the
// same program can be copied into a checkout of an older or newer library
// and run there for a before/after comparison.
require (
	github.com/outboxrelay/outboxrelay v0.2.0
	github.com/outboxrelay/outboxrelay/store/postgres v0.2.0
)

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/jackc/pgx/v5 v5.12.0
	gonum.org/v1/plot v0.17.0
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	filippo.io/edwards25519 v1.2.0 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)
