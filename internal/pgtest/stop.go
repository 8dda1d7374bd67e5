package pgtest

// StopContainer terminates the container the tests started, if any: for
// a TestMain that already calls another package's Main (testutil.Main,
// say), and so cannot call Main too.
//
//	code := testutil.Main(m)
//	if err := pgtest.StopContainer(); err != nil && code == 0 { code = 1 }
func StopContainer() error {
	if container == nil {
		return nil
	}
	err := container.Stop()
	container = nil
	return err
}
