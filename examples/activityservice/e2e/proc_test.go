//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// buildBinaries builds room-service and activity-service into a
// directory of the test's, as a deployment would run them.
func buildBinaries(t *testing.T) (roomBin, activityBin string) {
	t.Helper()
	dir := t.TempDir()
	roomBin, activityBin = filepath.Join(dir, "roomservice"), filepath.Join(dir, "activityservice")
	for bin, pkg := range map[string]string{
		roomBin:     "github.com/outboxrelay/outboxrelay/examples/roomservice",
		activityBin: "github.com/outboxrelay/outboxrelay/examples/activityservice",
	} {
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return roomBin, activityBin
}

// EnvLogDir names a directory to keep the processes' logs in (a CI
// artifact); without it they go to a directory of the test's.
const EnvLogDir = "OUTBOXRELAY_E2E_LOG_DIR"

// proc is a service process. Its JSON log (stderr) goes to a file of the
// test's, and is watched for the line that says it serves.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	// addr and adminAddr are from its "serving" log line.
	addr, adminAddr string
	exited          chan struct{}
}

// startProc runs bin with args and env (added to this process's), waits
// until it logs servingMsg, and kills it when the test ends. It fails t
// if the process exits or does not serve within a minute.
func startProc(t *testing.T, name, bin string, env []string, servingMsg string, args ...string) *proc {
	t.Helper()
	dir := os.Getenv(EnvLogDir)
	if dir == "" {
		dir = t.TempDir()
	}
	logFile, err := os.CreateTemp(dir, name+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	serving := make(chan map[string]any, 1)
	w := &lineWatcher{match: servingMsg, found: serving}
	p := &proc{name: name, cmd: exec.Command(bin, args...), logPath: logFile.Name(), exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, io.MultiWriter(logFile, w)
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	t.Cleanup(p.kill)
	select {
	case line := <-serving:
		p.addr, _ = line["addr"].(string)
		p.adminAddr, _ = line["admin_addr"].(string)
		return p
	case <-p.exited:
		t.Fatalf("%s exited before serving:\n%s", name, p.tail())
	case <-time.After(time.Minute):
		t.Fatalf("%s did not serve within a minute:\n%s", name, p.tail())
	}
	return nil
}

// kill SIGKILLs the process and waits until it has exited.
func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// stop sends SIGTERM and waits until it has exited, within a deadline,
// and returns its exit error.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not stop within a minute after SIGINT:\n%s", p.name, p.tail())
	}
	if !p.cmd.ProcessState.Success() {
		t.Errorf("%s: %v after SIGINT:\n%s", p.name, p.cmd.ProcessState, p.tail())
	}
}

// tail is the end of the process's log, for a failure message.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// countLogLines counts the log lines whose msg is msg.
func (p *proc) countLogLines(t *testing.T, msg string) int {
	t.Helper()
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct{ Msg string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == msg {
			n++
		}
	}
	return n
}

// lineWatcher reads a JSON log as it is written and sends the first line
// whose msg is match.
type lineWatcher struct {
	match string
	found chan map[string]any
	mu    sync.Mutex
	buf   []byte
	done  bool
}

func (w *lineWatcher) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(b), nil
	}
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := w.buf[:i]
		w.buf = w.buf[i+1:]
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m["msg"] == w.match {
			w.found <- m
			w.done, w.buf = true, nil
			return len(b), nil
		}
	}
}

// yamlQuote quotes s for a YAML file.
func yamlQuote(s string) string { return fmt.Sprintf("%q", s) }
