package postgres

// PurgeSQL is the statement with which Purge deletes a batch, for the
// plan tests.
func (ib *Inbox) PurgeSQL() string { return ib.core.Statements().Purge }

// InsertSQL is the duplicate check, for the plan tests.
func (ib *Inbox) InsertSQL() string { return ib.core.Statements().Insert }

// ContainsSQL is Contains' lookup, for the plan tests.
func (ib *Inbox) ContainsSQL() string { return ib.core.Statements().Contains }
