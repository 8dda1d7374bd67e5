package testutil

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// ContainerProcess is a run of the program internal/testcontainer, which
// holds the test container until its standard input is closed.
type ContainerProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer
}

// StartContainer runs internal/testcontainer with args (none for MySQL
// or MariaDB, "postgres" for PostgreSQL), which starts the test image
// that the environment chooses and prints its server's DSN. The
// container lives until Stop.
func StartContainer(args ...string) (*ContainerProcess, string, error) {
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		return nil, "", errors.New("cannot find internal/testcontainer")
	}
	cmd := exec.Command("go", append([]string{"run", "."}, args...)...)
	cmd.Dir = filepath.Join(filepath.Dir(here), "..", "testcontainer")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("run internal/testcontainer: %w", err)
	}
	p := &ContainerProcess{cmd: cmd, stdin: stdin, stderr: &stderr}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = p.Stop()
		return nil, "", fmt.Errorf("internal/testcontainer printed no DSN: %s", cause(stderr.String()))
	}
	return p, strings.TrimSpace(line), nil
}

// Stop closes the program's standard input, which terminates the
// container, and waits for it to end.
func (p *ContainerProcess) Stop() error {
	_ = p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(p.stderr.String()))
	}
	if p.stderr.Len() > 0 {
		fmt.Fprint(os.Stderr, p.stderr.String())
	}
	return nil
}

// cause is what the program's standard error says went wrong: its own
// lines (prefixed "testcontainer:"), without testcontainers-go's log, or
// else the last line (a build error, say).
func cause(stderr string) string {
	var own []string
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "testcontainer:") {
			own = append(own, l)
		}
	}
	if len(own) == 0 {
		return lines[len(lines)-1]
	}
	return strings.Join(own, "; ")
}
