package chaos

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// proc is a child process the harness supervises: an errand work or serve
// process, or a skewed worker. The nemesis kills, stops and restarts it.
type proc struct {
	name string
	argv []string
	env  []string
	log  string // stderr and stdout, appended across restarts

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool // SIGSTOPped
	starts  int
	// exits counts exits the harness did not cause (a crash).
	exits int
	// killed is set while the harness kills or drains it on purpose.
	killed bool
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	// A group of its own, so that the nemesis can signal the child alone;
	// then neither Ctrl-C nor a test binary killed on its timeout reaches
	// it, and the kernel kills it when the harness's process ends instead
	// of leaving it to run on, holding its ports and writing to the
	// database.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.done, p.stopped, p.killed = cmd, make(chan struct{}), false, false
	p.starts++
	done := p.done
	go func() {
		cmd.Wait()
		f.Close()
		p.mu.Lock()
		if !p.killed {
			p.exits++
		}
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

func (p *proc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// crashed reports that the process exited without the harness causing it.
func (p *proc) crashed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.killed {
		return false
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return fmt.Errorf("%s is not running", p.name)
	}
	switch sig {
	case syscall.SIGKILL, syscall.SIGTERM:
		p.killed = true
		if p.stopped && sig == syscall.SIGTERM {
			p.cmd.Process.Signal(syscall.SIGCONT)
		}
	case syscall.SIGSTOP:
		p.stopped = true
	case syscall.SIGCONT:
		p.stopped = false
	}
	return p.cmd.Process.Signal(sig)
}

// kill SIGKILLs the process and waits for it.
func (p *proc) kill() {
	if p.signal(syscall.SIGKILL) == nil {
		p.wait(30 * time.Second)
	}
}

// stop drains the process with SIGTERM, then SIGKILL past grace.
func (p *proc) stop(grace time.Duration) {
	if !p.alive() {
		return
	}
	p.signal(syscall.SIGTERM)
	if !p.wait(grace) {
		p.kill()
	}
}

func (p *proc) wait(d time.Duration) bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// count counts the lines of the process's log that contain s.
func (p *proc) count(s string) int {
	f, err := os.Open(p.log)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), []byte(s)) {
			n++
		}
	}
	return n
}
