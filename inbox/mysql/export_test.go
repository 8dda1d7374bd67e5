package mysql

// PurgeOldestSQL is the statement with which ib's Purge reads a batch,
// for the plan tests.
func PurgeOldestSQL(ib *Inbox) string { return dialect{}.Statements().Fill(ib.Table()).PurgeOldest }
