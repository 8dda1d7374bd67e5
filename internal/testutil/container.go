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

// containerProcess is a run of the program internal/testcontainer, which
// holds the test container until its standard input is closed.
type containerProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer
}

// startContainer runs internal/testcontainer, which starts the test image
// (the same environment chooses it) and prints its server's DSN.
func startContainer() (string, error) {
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot find internal/testcontainer")
	}
	cmd := exec.Command("go", "run", ".")
	cmd.Dir = filepath.Join(filepath.Dir(here), "..", "testcontainer")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("run internal/testcontainer: %w", err)
	}
	p := &containerProcess{cmd: cmd, stdin: stdin, stderr: &stderr}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = p.stop()
		return "", fmt.Errorf("internal/testcontainer printed no DSN: %s", cause(stderr.String()))
	}
	container = p
	return strings.TrimSpace(line), nil
}

// stop closes the program's standard input, which terminates the
// container, and waits for it to end.
func (p *containerProcess) stop() error {
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
