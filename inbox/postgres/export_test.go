package postgres

import "github.com/outboxrelay/outboxrelay/inbox/internal/sqldialect"

// Statements are ib's SQL, for the plan tests: Purge deletes a batch
// with Purge, Insert is the duplicate check, Contains the lookup.
func Statements(ib *Inbox) sqldialect.Statements { return dialect{}.Statements().Fill(ib.Table()) }
