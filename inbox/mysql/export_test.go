package mysql

// PurgeOldestSQL is the statement with which Purge reads a batch, for
// the plan tests.
func (ib *Inbox) PurgeOldestSQL() string { return ib.core.Statements().PurgeOldest }
