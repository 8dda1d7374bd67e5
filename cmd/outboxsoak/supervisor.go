package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// supervisor runs the worker processes, one per slot: the program itself
// (exe) with the hidden worker subcommand. A process that exits before
// stop, by a crash or a kill, is started again, as a service's
// orchestrator would; each process's output goes to a log of its own in
// dir.
type supervisor struct {
	exe    string
	base   workerConfig
	dsn    string
	dir    string
	logger *slog.Logger
	// restartPause is the wait before a process that exited is started
	// again, so that one that fails at once does not spin.
	restartPause time.Duration

	mu       sync.Mutex
	procs    []*workerProc // by slot
	gens     int
	stopping bool
	stopped  chan struct{} // closed by stop: ends restart pauses
	crashes  int           // exits nobody asked for
	wg       sync.WaitGroup
}

// workerProc is one worker process.
type workerProc struct {
	slot, gen int
	cmd       *exec.Cmd
	done      chan struct{}
	killed    bool // by kill, not a crash
}

func newSupervisor(exe string, base workerConfig, dsn, dir string, slots int, logger *slog.Logger) *supervisor {
	return &supervisor{exe: exe, base: base, dsn: dsn, dir: dir, logger: logger, restartPause: 500 * time.Millisecond,
		procs: make([]*workerProc, slots), stopped: make(chan struct{})}
}

// startAll starts a process in every slot.
func (s *supervisor) startAll() error {
	for slot := range s.procs {
		if err := s.start(slot); err != nil {
			return err
		}
	}
	return nil
}

// start starts a process in slot.
func (s *supervisor) start(slot int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil
	}
	s.gens++
	cfg := s.base
	cfg.Slot = slot
	raw, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(s.dir, fmt.Sprintf("worker-%d-%03d.log", slot, s.gens)))
	if err != nil {
		return err
	}
	cmd := exec.Command(s.exe, workerCommand, "--config", string(raw))
	cmd.Env = append(os.Environ(), envDSN+"="+s.dsn) // the last of a duplicate key wins
	cmd.Stdout, cmd.Stderr = log, log
	// A group of its own: a terminal's Ctrl-C reaches the run, which
	// stops the workers in order, and not the workers directly.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start worker %d: %w", slot, err)
	}
	p := &workerProc{slot: slot, gen: s.gens, cmd: cmd, done: make(chan struct{})}
	s.procs[slot] = p
	s.wg.Go(func() { s.wait(p, log) })
	return nil
}

// wait waits for p to exit and starts another in its slot unless the
// supervisor is stopping.
func (s *supervisor) wait(p *workerProc, log *os.File) {
	err := p.cmd.Wait()
	log.Close()
	close(p.done)
	s.mu.Lock()
	restart := !s.stopping && s.procs[p.slot] == p
	if restart && !p.killed {
		s.crashes++
		s.logger.Warn("a worker process exited; starting another", slog.Int("slot", p.slot), slog.Int("pid", p.cmd.Process.Pid),
			slog.Any("exit", err), slog.String("log", log.Name()))
	}
	s.mu.Unlock()
	if !restart {
		return
	}
	select {
	case <-s.stopped:
		return
	case <-time.After(s.restartPause):
	}
	if err := s.start(p.slot); err != nil {
		s.logger.Error("could not start a worker process", slog.Int("slot", p.slot), slog.String("error", err.Error()))
	}
}

// pids returns the process ID in every slot (0 for none).
func (s *supervisor) pids() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int, len(s.procs))
	for i, p := range s.procs {
		if p != nil {
			out[i] = p.cmd.Process.Pid
		}
	}
	return out
}

// kill SIGKILLs slot's process and returns its pid once it has exited;
// another is started in its place.
func (s *supervisor) kill(slot int) (int, error) {
	s.mu.Lock()
	p := s.procs[slot]
	if p == nil || s.stopping {
		s.mu.Unlock()
		return 0, fmt.Errorf("no worker process in slot %d", slot)
	}
	p.killed = true
	s.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, err
	}
	<-p.done
	return p.cmd.Process.Pid, nil
}

// counts returns how many processes were started in all, and how many
// exited on their own.
func (s *supervisor) counts() (started, crashes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gens, s.crashes
}

// stop sends SIGTERM to every process, waits until ctx ends for them to
// exit, SIGKILLs those that have not, and returns how many had to be
// killed.
func (s *supervisor) stop(ctx context.Context) int {
	s.mu.Lock()
	s.stopping = true
	close(s.stopped)
	procs := append([]*workerProc(nil), s.procs...)
	s.mu.Unlock()
	for _, p := range procs {
		if p != nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	killed := 0
	for _, p := range procs {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			_ = p.cmd.Process.Kill()
			<-p.done
			killed++
		}
	}
	s.wg.Wait()
	return killed
}
